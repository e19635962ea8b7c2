from http import HTTPStatus
from typing import Any
from urllib.parse import quote

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.error_body import ErrorBody
from ...models.quote_response import QuoteResponse
from ...models.set_quote_request import SetQuoteRequest
from ...types import Response


def _get_kwargs(
    symbol: str,
    *,
    body: SetQuoteRequest,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}

    _kwargs: dict[str, Any] = {
        "method": "put",
        "url": "/api/admin/quotes/{symbol}".format(
            symbol=quote(str(symbol), safe=""),
        ),
    }

    _kwargs["json"] = body.to_dict()

    headers["Content-Type"] = "application/json"

    _kwargs["headers"] = headers
    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> ErrorBody | QuoteResponse | None:
    if response.status_code == 200:
        response_200 = QuoteResponse.from_dict(response.json())

        return response_200

    if response.status_code == 400:
        response_400 = ErrorBody.from_dict(response.json())

        return response_400

    if response.status_code == 401:
        response_401 = ErrorBody.from_dict(response.json())

        return response_401

    if response.status_code == 403:
        response_403 = ErrorBody.from_dict(response.json())

        return response_403

    if response.status_code == 413:
        response_413 = ErrorBody.from_dict(response.json())

        return response_413

    if response.status_code == 415:
        response_415 = ErrorBody.from_dict(response.json())

        return response_415

    if response.status_code == 422:
        response_422 = ErrorBody.from_dict(response.json())

        return response_422

    if response.status_code == 431:
        response_431 = ErrorBody.from_dict(response.json())

        return response_431

    if response.status_code == 500:
        response_500 = ErrorBody.from_dict(response.json())

        return response_500

    if response.status_code == 503:
        response_503 = ErrorBody.from_dict(response.json())

        return response_503

    if client.raise_on_unexpected_status:
        raise errors.UnexpectedStatus(response.status_code, response.content)
    else:
        return None


def _build_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Response[ErrorBody | QuoteResponse]:
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
    body: SetQuoteRequest,
) -> Response[ErrorBody | QuoteResponse]:
    """Set a symbol's quote (operators)

     Commits the quote as a numbered quote event; the resting orders it makes marketable then fill in
    short per-account transactions, audited with the event. Accounts reached within a quarter of the
    request timeout are done; the rest (`pending_accounts`) are swept right after. `422 invalid_quote`
    when bid > ask or a price is negative or out of range, `422 invalid_symbol`.

    Args:
        symbol (str):
        body (SetQuoteRequest): `PUT /api/admin/quotes/{symbol}`.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorBody | QuoteResponse]
    """

    kwargs = _get_kwargs(
        symbol=symbol,
        body=body,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    symbol: str,
    *,
    client: AuthenticatedClient,
    body: SetQuoteRequest,
) -> ErrorBody | QuoteResponse | None:
    """Set a symbol's quote (operators)

     Commits the quote as a numbered quote event; the resting orders it makes marketable then fill in
    short per-account transactions, audited with the event. Accounts reached within a quarter of the
    request timeout are done; the rest (`pending_accounts`) are swept right after. `422 invalid_quote`
    when bid > ask or a price is negative or out of range, `422 invalid_symbol`.

    Args:
        symbol (str):
        body (SetQuoteRequest): `PUT /api/admin/quotes/{symbol}`.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ErrorBody | QuoteResponse
    """

    return sync_detailed(
        symbol=symbol,
        client=client,
        body=body,
    ).parsed


async def asyncio_detailed(
    symbol: str,
    *,
    client: AuthenticatedClient,
    body: SetQuoteRequest,
) -> Response[ErrorBody | QuoteResponse]:
    """Set a symbol's quote (operators)

     Commits the quote as a numbered quote event; the resting orders it makes marketable then fill in
    short per-account transactions, audited with the event. Accounts reached within a quarter of the
    request timeout are done; the rest (`pending_accounts`) are swept right after. `422 invalid_quote`
    when bid > ask or a price is negative or out of range, `422 invalid_symbol`.

    Args:
        symbol (str):
        body (SetQuoteRequest): `PUT /api/admin/quotes/{symbol}`.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorBody | QuoteResponse]
    """

    kwargs = _get_kwargs(
        symbol=symbol,
        body=body,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    symbol: str,
    *,
    client: AuthenticatedClient,
    body: SetQuoteRequest,
) -> ErrorBody | QuoteResponse | None:
    """Set a symbol's quote (operators)

     Commits the quote as a numbered quote event; the resting orders it makes marketable then fill in
    short per-account transactions, audited with the event. Accounts reached within a quarter of the
    request timeout are done; the rest (`pending_accounts`) are swept right after. `422 invalid_quote`
    when bid > ask or a price is negative or out of range, `422 invalid_symbol`.

    Args:
        symbol (str):
        body (SetQuoteRequest): `PUT /api/admin/quotes/{symbol}`.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ErrorBody | QuoteResponse
    """

    return (
        await asyncio_detailed(
            symbol=symbol,
            client=client,
            body=body,
        )
    ).parsed
