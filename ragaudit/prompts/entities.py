"""Context entity recall: the named entities of a text."""

# ruff: noqa: E501  (a CJK character is two columns wide: Chinese prompt text would wrap mid-phrase)

from __future__ import annotations

from ragas.metrics.collections.context_entity_recall.util import ExtractEntitiesPrompt

from ragaudit.prompts._ragas import translated

ENTITIES = translated(
    "context_entity_recall.entities",
    ExtractEntitiesPrompt,
    "给定一段文本，提取其中不重复的实体。\n"
    "同一实体的不同形式或不同提法视为同一个实体，只保留一次。\n"
    "命名实体包括：人物、地点、组织机构、日期、金额以及其他专有名词。实体按原文中的写法输出，不要翻译。",
    [
        (
            {
                "text": "埃菲尔铁塔位于法国巴黎，是全球最具标志性的地标之一。每年有数百万游客慕名而来，欣赏城市的壮丽景色。"
                "它于1889年完工，恰好赶上1889年世界博览会。"
            },
            {"entities": ["埃菲尔铁塔", "巴黎", "法国", "1889年", "世界博览会"]},
        ),
        (
            {
                "text": "罗马斗兽场，又称弗拉维圆形剧场，是罗马建筑和工程成就的丰碑。它于公元70年在韦斯巴芗皇帝治下开始建造，"
                "由其子提图斯于公元80年完成，可容纳5万至8万名观众观看角斗比赛和公共表演。"
            },
            {
                "entities": [
                    "罗马斗兽场",
                    "罗马",
                    "弗拉维圆形剧场",
                    "韦斯巴芗",
                    "公元70年",
                    "提图斯",
                    "公元80年",
                ]
            },
        ),
        (
            {
                "text": "长城东西绵延超过21196公里，是古代防御建筑的奇迹。它为抵御北方入侵而建，早在公元前7世纪就开始修筑。"
                "如今它是联合国教科文组织世界遗产，也是主要的旅游胜地。"
            },
            {"entities": ["长城", "21196公里", "公元前7世纪", "联合国教科文组织世界遗产"]},
        ),
    ],
)

__all__ = ["ENTITIES"]
