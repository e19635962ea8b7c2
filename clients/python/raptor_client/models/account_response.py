from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.account_mode import AccountMode
from ..models.currency import Currency
from ..types import UNSET, Unset

T = TypeVar("T", bound="AccountResponse")


@_attrs_define
class AccountResponse:
    """The paper account.

    Attributes:
        buying_power (str): Cash minus the reservations of open orders and of the option spreads held
            (`reserved_cash + spread_requirement`): a cash account has no leverage, so it never
            exceeds `cash` (a credit received raises cash and buying power only beyond what its
            spread can lose).
        cash (str): Settled cash. Example: 100000.00.
        currency (Currency): The account's currency.
        equity (str): `cash + market_value`. Example: 101240.00.
        marked_at_cost (list[str]): The symbols of the positions without a quote, marked at their average entry price
            (no
            unrealized P&L counted for them); empty when every position has a quote.
        market_value (str): The positions' value at the quotes' mid (shorts count negative; a position without a
            quote at its average entry price: see `marked_at_cost`). Example: 1240.00.
        mode (AccountMode): The account's mode (only `paper` accounts trade here).
        realized_pnl (str): Cumulative realized P&L.
        reserved_cash (str): Reserved by open orders.
        spread_requirement (str): Reserved against the maximum loss of the short calls held: each is paired with a long
            call on the same underlying expiring no earlier, and a pair whose long strike is above
            the short's can lose the strike difference x 100 per contract (a vertical credit
            spread's width). Example: 0.00.
        uncovered_short_options (list[str]): Short options held without a long call on the same underlying expiring no
            earlier to
            cover them, by symbol (every short put; a short call whose covering long expired first).
            Empty when every short is covered. Example: [].
        unrealized_pnl (str): The positions' P&L at the same marks, not yet realized. Example: 0.00.
        idempotency_replayed (bool | Unset): Present (`true`) only on a replay of a stored answer.
    """

    buying_power: str
    cash: str
    currency: Currency
    equity: str
    marked_at_cost: list[str]
    market_value: str
    mode: AccountMode
    realized_pnl: str
    reserved_cash: str
    spread_requirement: str
    uncovered_short_options: list[str]
    unrealized_pnl: str
    idempotency_replayed: bool | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        buying_power = self.buying_power

        cash = self.cash

        currency = self.currency.value

        equity = self.equity

        marked_at_cost = self.marked_at_cost

        market_value = self.market_value

        mode = self.mode.value

        realized_pnl = self.realized_pnl

        reserved_cash = self.reserved_cash

        spread_requirement = self.spread_requirement

        uncovered_short_options = self.uncovered_short_options

        unrealized_pnl = self.unrealized_pnl

        idempotency_replayed = self.idempotency_replayed

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "buying_power": buying_power,
                "cash": cash,
                "currency": currency,
                "equity": equity,
                "marked_at_cost": marked_at_cost,
                "market_value": market_value,
                "mode": mode,
                "realized_pnl": realized_pnl,
                "reserved_cash": reserved_cash,
                "spread_requirement": spread_requirement,
                "uncovered_short_options": uncovered_short_options,
                "unrealized_pnl": unrealized_pnl,
            }
        )
        if idempotency_replayed is not UNSET:
            field_dict["idempotency_replayed"] = idempotency_replayed

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        buying_power = d.pop("buying_power")

        cash = d.pop("cash")

        currency = Currency(d.pop("currency"))

        equity = d.pop("equity")

        marked_at_cost = cast(list[str], d.pop("marked_at_cost"))

        market_value = d.pop("market_value")

        mode = AccountMode(d.pop("mode"))

        realized_pnl = d.pop("realized_pnl")

        reserved_cash = d.pop("reserved_cash")

        spread_requirement = d.pop("spread_requirement")

        uncovered_short_options = cast(list[str], d.pop("uncovered_short_options"))

        unrealized_pnl = d.pop("unrealized_pnl")

        idempotency_replayed = d.pop("idempotency_replayed", UNSET)

        account_response = cls(
            buying_power=buying_power,
            cash=cash,
            currency=currency,
            equity=equity,
            marked_at_cost=marked_at_cost,
            market_value=market_value,
            mode=mode,
            realized_pnl=realized_pnl,
            reserved_cash=reserved_cash,
            spread_requirement=spread_requirement,
            uncovered_short_options=uncovered_short_options,
            unrealized_pnl=unrealized_pnl,
            idempotency_replayed=idempotency_replayed,
        )

        account_response.additional_properties = d
        return account_response

    @property
    def additional_keys(self) -> list[str]:
        return list(self.additional_properties.keys())

    def __getitem__(self, key: str) -> Any:
        return self.additional_properties[key]

    def __setitem__(self, key: str, value: Any) -> None:
        self.additional_properties[key] = value

    def __delitem__(self, key: str) -> None:
        del self.additional_properties[key]

    def __contains__(self, key: str) -> bool:
        return key in self.additional_properties
