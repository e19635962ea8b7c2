from http import HTTPStatus
from typing import Any

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.get_subscription_response_401 import GetSubscriptionResponse401
from ...models.get_subscription_response_403 import GetSubscriptionResponse403
from ...models.get_subscription_response_404 import GetSubscriptionResponse404
from ...models.get_subscription_response_431 import GetSubscriptionResponse431
from ...models.get_subscription_response_500 import GetSubscriptionResponse500
from ...models.get_subscription_response_503 import GetSubscriptionResponse503
from ...models.subscription_response import SubscriptionResponse
from ...types import Response


def _get_kwargs() -> dict[str, Any]:

    _kwargs: dict[str, Any] = {
        "method": "get",
        "url": "/api/billing/subscription",
    }

    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> (
    GetSubscriptionResponse401
    | GetSubscriptionResponse403
    | GetSubscriptionResponse404
    | GetSubscriptionResponse431
    | GetSubscriptionResponse500
    | GetSubscriptionResponse503
    | SubscriptionResponse
    | None
):
    if response.status_code == 200:
        response_200 = SubscriptionResponse.from_dict(response.json())

        return response_200

    if response.status_code == 401:
        response_401 = GetSubscriptionResponse401.from_dict(response.json())

        return response_401

    if response.status_code == 403:
        response_403 = GetSubscriptionResponse403.from_dict(response.json())

        return response_403

    if response.status_code == 404:
        response_404 = GetSubscriptionResponse404.from_dict(response.json())

        return response_404

    if response.status_code == 431:
        response_431 = GetSubscriptionResponse431.from_dict(response.json())

        return response_431

    if response.status_code == 500:
        response_500 = GetSubscriptionResponse500.from_dict(response.json())

        return response_500

    if response.status_code == 503:
        response_503 = GetSubscriptionResponse503.from_dict(response.json())

        return response_503

    if client.raise_on_unexpected_status:
        raise errors.UnexpectedStatus(response.status_code, response.content)
    else:
        return None


def _build_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Response[
    GetSubscriptionResponse401
    | GetSubscriptionResponse403
    | GetSubscriptionResponse404
    | GetSubscriptionResponse431
    | GetSubscriptionResponse500
    | GetSubscriptionResponse503
    | SubscriptionResponse
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
    GetSubscriptionResponse401
    | GetSubscriptionResponse403
    | GetSubscriptionResponse404
    | GetSubscriptionResponse431
    | GetSubscriptionResponse500
    | GetSubscriptionResponse503
    | SubscriptionResponse
]:
    """Read the caller's subscription

     The caller's subscription as mirrored from Stripe (the one still running, else the newest): status,
    price, current period end, cancel at period end. Read from the mirror; Stripe is not called. `404
    not_found` when there is none.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[GetSubscriptionResponse401 | GetSubscriptionResponse403 | GetSubscriptionResponse404 | GetSubscriptionResponse431 | GetSubscriptionResponse500 | GetSubscriptionResponse503 | SubscriptionResponse]
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
    GetSubscriptionResponse401
    | GetSubscriptionResponse403
    | GetSubscriptionResponse404
    | GetSubscriptionResponse431
    | GetSubscriptionResponse500
    | GetSubscriptionResponse503
    | SubscriptionResponse
    | None
):
    """Read the caller's subscription

     The caller's subscription as mirrored from Stripe (the one still running, else the newest): status,
    price, current period end, cancel at period end. Read from the mirror; Stripe is not called. `404
    not_found` when there is none.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        GetSubscriptionResponse401 | GetSubscriptionResponse403 | GetSubscriptionResponse404 | GetSubscriptionResponse431 | GetSubscriptionResponse500 | GetSubscriptionResponse503 | SubscriptionResponse
    """

    return sync_detailed(
        client=client,
    ).parsed


async def asyncio_detailed(
    *,
    client: AuthenticatedClient,
) -> Response[
    GetSubscriptionResponse401
    | GetSubscriptionResponse403
    | GetSubscriptionResponse404
    | GetSubscriptionResponse431
    | GetSubscriptionResponse500
    | GetSubscriptionResponse503
    | SubscriptionResponse
]:
    """Read the caller's subscription

     The caller's subscription as mirrored from Stripe (the one still running, else the newest): status,
    price, current period end, cancel at period end. Read from the mirror; Stripe is not called. `404
    not_found` when there is none.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[GetSubscriptionResponse401 | GetSubscriptionResponse403 | GetSubscriptionResponse404 | GetSubscriptionResponse431 | GetSubscriptionResponse500 | GetSubscriptionResponse503 | SubscriptionResponse]
    """

    kwargs = _get_kwargs()

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    *,
    client: AuthenticatedClient,
) -> (
    GetSubscriptionResponse401
    | GetSubscriptionResponse403
    | GetSubscriptionResponse404
    | GetSubscriptionResponse431
    | GetSubscriptionResponse500
    | GetSubscriptionResponse503
    | SubscriptionResponse
    | None
):
    """Read the caller's subscription

     The caller's subscription as mirrored from Stripe (the one still running, else the newest): status,
    price, current period end, cancel at period end. Read from the mirror; Stripe is not called. `404
    not_found` when there is none.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        GetSubscriptionResponse401 | GetSubscriptionResponse403 | GetSubscriptionResponse404 | GetSubscriptionResponse431 | GetSubscriptionResponse500 | GetSubscriptionResponse503 | SubscriptionResponse
    """

    return (
        await asyncio_detailed(
            client=client,
        )
    ).parsed
