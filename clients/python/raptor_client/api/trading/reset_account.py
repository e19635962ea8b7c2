from http import HTTPStatus
from typing import Any

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.account_response import AccountResponse
from ...models.error_body import ErrorBody
from ...models.reset_account_request import ResetAccountRequest
from ...types import UNSET, Response, Unset


def _get_kwargs(
    *,
    body: ResetAccountRequest | Unset = UNSET,
    idempotency_key: str | Unset = UNSET,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}
    if not isinstance(idempotency_key, Unset):
        headers["Idempotency-Key"] = idempotency_key

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/api/trading/account/reset",
    }

    if not isinstance(body, Unset):
        _kwargs["json"] = body.to_dict()

    headers["Content-Type"] = "application/json"

    _kwargs["headers"] = headers
    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> AccountResponse | ErrorBody | None:
    if response.status_code == 200:
        response_200 = AccountResponse.from_dict(response.json())

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

    if response.status_code == 404:
        response_404 = ErrorBody.from_dict(response.json())

        return response_404

    if response.status_code == 409:
        response_409 = ErrorBody.from_dict(response.json())

        return response_409

    if response.status_code == 413:
        response_413 = ErrorBody.from_dict(response.json())

        return response_413

    if response.status_code == 415:
        response_415 = ErrorBody.from_dict(response.json())

        return response_415

    if response.status_code == 422:
        response_422 = ErrorBody.from_dict(response.json())

        return response_422

    if response.status_code == 429:
        response_429 = ErrorBody.from_dict(response.json())

        return response_429

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
) -> Response[AccountResponse | ErrorBody]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    *,
    client: AuthenticatedClient,
    body: ResetAccountRequest | Unset = UNSET,
    idempotency_key: str | Unset = UNSET,
) -> Response[AccountResponse | ErrorBody]:
    """Reset the paper account

     Starting cash, no positions, every open order canceled, audited; the feed gets a `reset` entry. Tier
    1 (fail-closed): send an `Idempotency-Key`, and a retry with it replays the first answer. Body `{}`
    or none. `403 live_trading_unavailable` on a live account.

    Args:
        idempotency_key (str | Unset):
        body (ResetAccountRequest | Unset): `POST /api/trading/account/reset` takes `{}`.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[AccountResponse | ErrorBody]
    """

    kwargs = _get_kwargs(
        body=body,
        idempotency_key=idempotency_key,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    *,
    client: AuthenticatedClient,
    body: ResetAccountRequest | Unset = UNSET,
    idempotency_key: str | Unset = UNSET,
) -> AccountResponse | ErrorBody | None:
    """Reset the paper account

     Starting cash, no positions, every open order canceled, audited; the feed gets a `reset` entry. Tier
    1 (fail-closed): send an `Idempotency-Key`, and a retry with it replays the first answer. Body `{}`
    or none. `403 live_trading_unavailable` on a live account.

    Args:
        idempotency_key (str | Unset):
        body (ResetAccountRequest | Unset): `POST /api/trading/account/reset` takes `{}`.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        AccountResponse | ErrorBody
    """

    return sync_detailed(
        client=client,
        body=body,
        idempotency_key=idempotency_key,
    ).parsed


async def asyncio_detailed(
    *,
    client: AuthenticatedClient,
    body: ResetAccountRequest | Unset = UNSET,
    idempotency_key: str | Unset = UNSET,
) -> Response[AccountResponse | ErrorBody]:
    """Reset the paper account

     Starting cash, no positions, every open order canceled, audited; the feed gets a `reset` entry. Tier
    1 (fail-closed): send an `Idempotency-Key`, and a retry with it replays the first answer. Body `{}`
    or none. `403 live_trading_unavailable` on a live account.

    Args:
        idempotency_key (str | Unset):
        body (ResetAccountRequest | Unset): `POST /api/trading/account/reset` takes `{}`.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[AccountResponse | ErrorBody]
    """

    kwargs = _get_kwargs(
        body=body,
        idempotency_key=idempotency_key,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    *,
    client: AuthenticatedClient,
    body: ResetAccountRequest | Unset = UNSET,
    idempotency_key: str | Unset = UNSET,
) -> AccountResponse | ErrorBody | None:
    """Reset the paper account

     Starting cash, no positions, every open order canceled, audited; the feed gets a `reset` entry. Tier
    1 (fail-closed): send an `Idempotency-Key`, and a retry with it replays the first answer. Body `{}`
    or none. `403 live_trading_unavailable` on a live account.

    Args:
        idempotency_key (str | Unset):
        body (ResetAccountRequest | Unset): `POST /api/trading/account/reset` takes `{}`.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        AccountResponse | ErrorBody
    """

    return (
        await asyncio_detailed(
            client=client,
            body=body,
            idempotency_key=idempotency_key,
        )
    ).parsed
