"""The audit's redaction: what personal data it finds, and the ordinary text it leaves alone."""

from __future__ import annotations

import pytest

from ragaudit.audit import RedactOptions
from ragaudit.audit._redact import Redactor


def redact(text: str, **options: object) -> str:
    return Redactor(RedactOptions.model_validate(options))(text) or ""


# ------------------------------------------------------------------------------ phones


@pytest.mark.parametrize(
    ("text", "want"),
    [
        # Written next to Chinese text or letters, as a Chinese user writes a number.
        ("手机号13912345678", "手机号[phone]"),
        ("请拨打13812345678联系", "请拨打[phone]联系"),
        ("call13812345678", "call[phone]"),
        ("电话:010-62751234,传真0755-86013388。", "电话:[phone],传真[phone]。"),
    ],
)
def test_a_phone_written_next_to_cjk_text_or_letters_is_found(text: str, want: str) -> None:
    assert redact(text) == want


@pytest.mark.parametrize(
    "phone",
    [
        # China: mobiles and landlines, with and without separators and +86.
        "13912345678",
        "139 1234 5678",
        "139-1234-5678",
        "+86 139 1234 5678",
        "+8613912345678",
        "010-62751234",
        # The US.
        "(202) 456-1414",
        "202-456-1414",
        "202.456.1414",
        "2024561414",
        "+1 202-456-1414",
        "1-202-456-1414",
        # The UK.
        "020 7946 0958",
        "07911 123456",
        "+44 20 7946 0958",
        "+44 7911 123456",
        # Germany.
        "030 12345678",
        "030/12345678",
        "0151 23456789",
        "+49 30 12345678",
        "+49 (0)30 12345678",
        # India.
        "98765 43210",
        "9876543210",
        "+91 98765 43210",
        "022 2345 6789",
        # Japan.
        "03-1234-5678",
        "090-1234-5678",
        "+81 90-1234-5678",
        "+81 3 1234 5678",
    ],
)
def test_the_national_formats_of_six_countries_are_phones(phone: str) -> None:
    assert redact(f"reach me at {phone} today") == "reach me at [phone] today"
    assert redact(f"联系{phone}。") == "联系[phone]。"


def test_two_numbers_side_by_side_are_two_phones() -> None:
    assert redact("+1 202-456-1414 13812345678") == "[phone] [phone]"
    assert redact("13912345678 13812345678") == "[phone] [phone]"
    assert redact("010-62751234/13912345678") == "[phone]/[phone]"
    # A date or a count beside a number is left, the number is not.
    assert redact("2021-12-29 13912345678") == "2021-12-29 [phone]"
    assert redact("12345 – 13912345678") == "12345 – [phone]"
    assert redact("手机号１３９１２３４５６７８") == "手机号[phone]"  # full-width digits


def test_national_formats_of_other_countries_are_found_when_asked_for() -> None:
    paris = "01 42 68 53 00"
    assert redact(f"tél {paris}") == f"tél {paris}"
    assert redact(f"tél {paris}", phone_regions=["FR"]) == "tél [phone]"
    assert redact("tel +33 1 42 68 53 00", phone_regions=[]) == "tel [phone]"
    with pytest.raises(ValueError, match="XX"):
        RedactOptions.model_validate({"phone_regions": ["XX"]})


# ------------------------------------------------------------------------------ e-mails


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("write to jürgen@müller.de today", "write to [email] today"),
        ("mail josé.garcía@correo.es.", "mail [email]."),
        ("邮箱:用户@例子.广告", "邮箱:[email]"),
        ("联系邮箱jürgen@müller.de联系我", "联系邮箱[email]联系我"),
        ("QQ邮箱13912345678@qq.com", "QQ邮箱[email]"),
        ("ana@xn--mller-kva.de", "[email]"),
    ],
)
def test_internationalised_e_mail_addresses_are_found(text: str, want: str) -> None:
    assert redact(text) == want


# ------------------------------------------------------------------------------ cards, IBANs


@pytest.mark.parametrize(
    "card",
    [
        "4111111111111111",
        "4111 1111 1111 1111",
        "4111-1111-1111-1111",
        "3782 822463 10005",  # American Express, 4-6-5
        "6222 0212 3456 7890 128",  # UnionPay, 19 digits
        "5555555555554444",
    ],
)
def test_luhn_valid_cards_in_their_groupings_are_cards(card: str) -> None:
    assert redact(f"paid with {card}.") == "paid with [card]."
    assert redact(f"卡号{card}已冻结") == "卡号[card]已冻结"


def test_the_teams_patterns_run_first_on_the_text_as_logged() -> None:
    # Run after the defaults, the account pattern met "GB82 WEST [phone]" and matched nothing.
    team = {"patterns": [{"name": "account", "pattern": r"GB\d\d ?WEST(?: ?\d){14}"}]}
    assert redact("IBAN GB82 WEST 1234 5698 7654 32", **team) == "IBAN [account]"
    ticket = {"patterns": [{"name": "ticket", "pattern": r"T-\d{11}"}]}
    assert redact("ticket T-13912345678", **ticket) == "ticket [ticket]"


def test_an_iban_is_found_by_its_check() -> None:
    assert redact("IBAN GB82 WEST 1234 5698 7654 32 please") == "IBAN [iban] please"
    assert redact("to DE89370400440532013000.") == "to [iban]."
    assert redact("账户DE89 3704 0044 0532 0130 00转账") == "账户[iban]转账"
    # A failed mod-97 check is not an IBAN.
    assert redact("ref DE89370400440532013001") == "ref DE89370400440532013001"


# ------------------------------------------------------------------------------ left alone


@pytest.mark.parametrize(
    "text",
    [
        "2021-12-29 14:58:03",
        "29.12.2021 14:58",
        "05.12 19:39",
        "回答时间:2007-12-08 20:11:12",
        "2016.08.19 15:25 回复",
        "server 192.168.100.200 answered",
        "from 1999-2021 on",
        "epoch 1640761083 and 1640761083123 ms",
        "at 116.4074, 39.9042",
        "ISBN 978-3-16-148410-0",
        "ISBN 9783161484100",
        "population 1 400 000 000",
        "population 1,400,000,000 or 1.400.000.000",
        "Feb 5, 2022 ... The",
        "version 10.0.19041.1415 and v2.3.14",
        "price $1,299.99 or ¥12999",
        "order 1234567812345678 and 2021122900123",
        "订单号20211229001234",
        "0 1 2 3 4 5 6 cm",
        "see pages 1024-1088",
        "on 2026-11-26 we shipped 12345 units",
        "lodash@4.17.21",
        "sha e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    ],
)
def test_ordinary_numbers_are_left_alone(text: str) -> None:
    assert redact(text) == text


def test_a_short_number_that_passes_luhn_is_not_a_card() -> None:
    # 051219 and 13912345678 pass the Luhn check: a card has 13 digits at least, and a
    # mobile number is a phone whatever its checksum.
    red = Redactor(RedactOptions())
    assert red("05.12 19:39 and 051219") == "05.12 19:39 and 051219"
    assert red("pay 4111 1111 1111 1111, call 13912345678") == "pay [card], call [phone]"
    assert red.counts == {"card": 1, "phone": 1}


def test_a_text_that_runs_out_of_its_budget_is_replaced_whole() -> None:
    slow = {"patterns": [{"name": "slow", "pattern": r"(a|aa)+$"}], "timeout_s": 0.05}
    red = Redactor(RedactOptions.model_validate(slow))
    assert red("a" * 40 + "!") == "[timeout]"
    assert red.counts == {"timeout": 1}
