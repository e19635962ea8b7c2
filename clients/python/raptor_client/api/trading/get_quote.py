from http import HTTPStatus
from typing import Any
from urllib.parse import quote

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.get_quote_response_401 import GetQuoteResponse401
from ...models.get_quote_response_403 import GetQuoteResponse403
from ...models.get_quote_response_404 import GetQuoteResponse404
from ...models.get_quote_response_422 import GetQuoteResponse422
from ...models.get_quote_response_431 import GetQuoteResponse431
from ...models.get_quote_response_500 import GetQuoteResponse500
from ...models.get_quote_response_503 import GetQuoteResponse503
from ...models.market_quote_response import MarketQuoteResponse
from ...types import Response


def _get_kwargs(
    symbol: str,
) -> dict[str, Any]:

    _kwargs: dict[str, Any] = {
        "method": "get",
        "url": "/api/trading/quotes/{symbol}".format(
            symbol=quote(str(symbol), safe=""),
        ),
    }

    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> (
    GetQuoteResponse401
    | GetQuoteResponse403
    | GetQuoteResponse404
    | GetQuoteResponse422
    | GetQuoteResponse431
    | GetQuoteResponse500
    | GetQuoteResponse503
    | MarketQuoteResponse
    | None
):
    if response.status_code == 200:
        response_200 = MarketQuoteResponse.from_dict(response.json())

        return response_200

    if response.status_code == 401:
        response_401 = GetQuoteResponse401.from_dict(response.json())

        return response_401

    if response.status_code == 403:
        response_403 = GetQuoteResponse403.from_dict(response.json())

        return response_403

    if response.status_code == 404:
        response_404 = GetQuoteResponse404.from_dict(response.json())

        return response_404

    if response.status_code == 422:
        response_422 = GetQuoteResponse422.from_dict(response.json())

        return response_422

    if response.status_code == 431:
        response_431 = GetQuoteResponse431.from_dict(response.json())

        return response_431

    if response.status_code == 500:
        response_500 = GetQuoteResponse500.from_dict(response.json())

        return response_500

    if response.status_code == 503:
        response_503 = GetQuoteResponse503.from_dict(response.json())

        return response_503

    if client.raise_on_unexpected_status:
        raise errors.UnexpectedStatus(response.status_code, response.content)
    else:
        return None


def _build_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Response[
    GetQuoteResponse401
    | GetQuoteResponse403
    | GetQuoteResponse404
    | GetQuoteResponse422
    | GetQuoteResponse431
    | GetQuoteResponse500
    | GetQuoteResponse503
    | MarketQuoteResponse
]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    symbol: str,
    *,
    client: AuthenticatedClient,
) -> Response[
    GetQuoteResponse401
    | GetQuoteResponse403
    | GetQuoteResponse404
    | GetQuoteResponse422
    | GetQuoteResponse431
    | GetQuoteResponse500
    | GetQuoteResponse503
    | MarketQuoteResponse
]:
    """Read a symbol's quote

     The current bid, ask and update time of `symbol`, for any signed-in caller (an app's display, not an
    order's price guarantee). `404 quote_unavailable` when no operator has quoted it.

    Args:
        symbol (str):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[GetQuoteResponse401 | GetQuoteResponse403 | GetQuoteResponse404 | GetQuoteResponse422 | GetQuoteResponse431 | GetQuoteResponse500 | GetQuoteResponse503 | MarketQuoteResponse]
    """

    kwargs = _get_kwargs(
        symbol=symbol,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    symbol: str,
    *,
    client: AuthenticatedClient,
) -> (
    GetQuoteResponse401
    | GetQuoteResponse403
    | GetQuoteResponse404
    | GetQuoteResponse422
    | GetQuoteResponse431
    | GetQuoteResponse500
    | GetQuoteResponse503
    | MarketQuoteResponse
    | None
):
    """Read a symbol's quote

     The current bid, ask and update time of `symbol`, for any signed-in caller (an app's display, not an
    order's price guarantee). `404 quote_unavailable` when no operator has quoted it.

    Args:
        symbol (str):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        GetQuoteResponse401 | GetQuoteResponse403 | GetQuoteResponse404 | GetQuoteResponse422 | GetQuoteResponse431 | GetQuoteResponse500 | GetQuoteResponse503 | MarketQuoteResponse
    """

    return sync_detailed(
        symbol=symbol,
        client=client,
    ).parsed


async def asyncio_detailed(
    symbol: str,
    *,
    client: AuthenticatedClient,
) -> Response[
    GetQuoteResponse401
    | GetQuoteResponse403
    | GetQuoteResponse404
    | GetQuoteResponse422
    | GetQuoteResponse431
    | GetQuoteResponse500
    | GetQuoteResponse503
    | MarketQuoteResponse
]:
    """Read a symbol's quote

     The current bid, ask and update time of `symbol`, for any signed-in caller (an app's display, not an
    order's price guarantee). `404 quote_unavailable` when no operator has quoted it.

    Args:
        symbol (str):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[GetQuoteResponse401 | GetQuoteResponse403 | GetQuoteResponse404 | GetQuoteResponse422 | GetQuoteResponse431 | GetQuoteResponse500 | GetQuoteResponse503 | MarketQuoteResponse]
    """

    kwargs = _get_kwargs(
        symbol=symbol,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    symbol: str,
    *,
    client: AuthenticatedClient,
) -> (
    GetQuoteResponse401
    | GetQuoteResponse403
    | GetQuoteResponse404
    | GetQuoteResponse422
    | GetQuoteResponse431
    | GetQuoteResponse500
    | GetQuoteResponse503
    | MarketQuoteResponse
    | None
):
    """Read a symbol's quote

     The current bid, ask and update time of `symbol`, for any signed-in caller (an app's display, not an
    order's price guarantee). `404 quote_unavailable` when no operator has quoted it.

    Args:
        symbol (str):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        GetQuoteResponse401 | GetQuoteResponse403 | GetQuoteResponse404 | GetQuoteResponse422 | GetQuoteResponse431 | GetQuoteResponse500 | GetQuoteResponse503 | MarketQuoteResponse
    """

    return (
        await asyncio_detailed(
            symbol=symbol,
            client=client,
        )
    ).parsed
