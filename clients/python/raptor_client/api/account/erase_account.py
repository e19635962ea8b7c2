from http import HTTPStatus
from typing import Any

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.erase_account_response_401 import EraseAccountResponse401
from ...models.erase_account_response_403 import EraseAccountResponse403
from ...models.erase_account_response_409 import EraseAccountResponse409
from ...models.erase_account_response_431 import EraseAccountResponse431
from ...models.erase_account_response_500 import EraseAccountResponse500
from ...models.erase_account_response_503 import EraseAccountResponse503
from ...models.erasure_response import ErasureResponse
from ...types import Response


def _get_kwargs() -> dict[str, Any]:

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/api/account/erasure",
    }

    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> (
    EraseAccountResponse401
    | EraseAccountResponse403
    | EraseAccountResponse409
    | EraseAccountResponse431
    | EraseAccountResponse500
    | EraseAccountResponse503
    | ErasureResponse
    | None
):
    if response.status_code == 200:
        response_200 = ErasureResponse.from_dict(response.json())

        return response_200

    if response.status_code == 401:
        response_401 = EraseAccountResponse401.from_dict(response.json())

        return response_401

    if response.status_code == 403:
        response_403 = EraseAccountResponse403.from_dict(response.json())

        return response_403

    if response.status_code == 409:
        response_409 = EraseAccountResponse409.from_dict(response.json())

        return response_409

    if response.status_code == 431:
        response_431 = EraseAccountResponse431.from_dict(response.json())

        return response_431

    if response.status_code == 500:
        response_500 = EraseAccountResponse500.from_dict(response.json())

        return response_500

    if response.status_code == 503:
        response_503 = EraseAccountResponse503.from_dict(response.json())

        return response_503

    if client.raise_on_unexpected_status:
        raise errors.UnexpectedStatus(response.status_code, response.content)
    else:
        return None


def _build_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Response[
    EraseAccountResponse401
    | EraseAccountResponse403
    | EraseAccountResponse409
    | EraseAccountResponse431
    | EraseAccountResponse500
    | EraseAccountResponse503
    | ErasureResponse
]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    *,
    client: AuthenticatedClient,
) -> Response[
    EraseAccountResponse401
    | EraseAccountResponse403
    | EraseAccountResponse409
    | EraseAccountResponse431
    | EraseAccountResponse500
    | EraseAccountResponse503
    | ErasureResponse
]:
    """Erase the caller's data

     Erases everything stored about the caller (GDPR): idempotency keys, audit rows, orders, fills,
    positions, the paper account, sessions, sign-in links, outbox messages, waitlist rows and the
    billing mirror; operator-owned rows that named the user keep no reference. The token stops working.
    `409 subscription_active` while a subscription still renews: cancel it first.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[EraseAccountResponse401 | EraseAccountResponse403 | EraseAccountResponse409 | EraseAccountResponse431 | EraseAccountResponse500 | EraseAccountResponse503 | ErasureResponse]
    """

    kwargs = _get_kwargs()

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    *,
    client: AuthenticatedClient,
) -> (
    EraseAccountResponse401
    | EraseAccountResponse403
    | EraseAccountResponse409
    | EraseAccountResponse431
    | EraseAccountResponse500
    | EraseAccountResponse503
    | ErasureResponse
    | None
):
    """Erase the caller's data

     Erases everything stored about the caller (GDPR): idempotency keys, audit rows, orders, fills,
    positions, the paper account, sessions, sign-in links, outbox messages, waitlist rows and the
    billing mirror; operator-owned rows that named the user keep no reference. The token stops working.
    `409 subscription_active` while a subscription still renews: cancel it first.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        EraseAccountResponse401 | EraseAccountResponse403 | EraseAccountResponse409 | EraseAccountResponse431 | EraseAccountResponse500 | EraseAccountResponse503 | ErasureResponse
    """

    return sync_detailed(
        client=client,
    ).parsed


async def asyncio_detailed(
    *,
    client: AuthenticatedClient,
) -> Response[
    EraseAccountResponse401
    | EraseAccountResponse403
    | EraseAccountResponse409
    | EraseAccountResponse431
    | EraseAccountResponse500
    | EraseAccountResponse503
    | ErasureResponse
]:
    """Erase the caller's data

     Erases everything stored about the caller (GDPR): idempotency keys, audit rows, orders, fills,
    positions, the paper account, sessions, sign-in links, outbox messages, waitlist rows and the
    billing mirror; operator-owned rows that named the user keep no reference. The token stops working.
    `409 subscription_active` while a subscription still renews: cancel it first.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[EraseAccountResponse401 | EraseAccountResponse403 | EraseAccountResponse409 | EraseAccountResponse431 | EraseAccountResponse500 | EraseAccountResponse503 | ErasureResponse]
    """

    kwargs = _get_kwargs()

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    *,
    client: AuthenticatedClient,
) -> (
    EraseAccountResponse401
    | EraseAccountResponse403
    | EraseAccountResponse409
    | EraseAccountResponse431
    | EraseAccountResponse500
    | EraseAccountResponse503
    | ErasureResponse
    | None
):
    """Erase the caller's data

     Erases everything stored about the caller (GDPR): idempotency keys, audit rows, orders, fills,
    positions, the paper account, sessions, sign-in links, outbox messages, waitlist rows and the
    billing mirror; operator-owned rows that named the user keep no reference. The token stops working.
    `409 subscription_active` while a subscription still renews: cancel it first.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        EraseAccountResponse401 | EraseAccountResponse403 | EraseAccountResponse409 | EraseAccountResponse431 | EraseAccountResponse500 | EraseAccountResponse503 | ErasureResponse
    """

    return (
        await asyncio_detailed(
            client=client,
        )
    ).parsed
