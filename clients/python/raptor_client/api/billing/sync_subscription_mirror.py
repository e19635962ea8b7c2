from http import HTTPStatus
from typing import Any

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.error_body import ErrorBody
from ...models.mirror_sync_request import MirrorSyncRequest
from ...models.subscription_response import SubscriptionResponse
from ...types import Response


def _get_kwargs(
    *,
    body: MirrorSyncRequest,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/api/billing/mirror-sync",
    }

    _kwargs["json"] = body.to_dict()

    headers["Content-Type"] = "application/json"

    _kwargs["headers"] = headers
    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> ErrorBody | SubscriptionResponse | None:
    if response.status_code == 200:
        response_200 = SubscriptionResponse.from_dict(response.json())

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
) -> Response[ErrorBody | SubscriptionResponse]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    *,
    client: AuthenticatedClient,
    body: MirrorSyncRequest,
) -> Response[ErrorBody | SubscriptionResponse]:
    """Upsert a subscription mirror (operators)

     Writes one subscription's state, as an operator or a service read it from Stripe, into the mirror,
    upserted by `stripe_subscription_id`. Idempotent by itself: the same body twice leaves one row with
    the same state. `422 invalid_subscription` for an unknown status, a malformed Stripe id or a
    `user_id` that names no user.

    Args:
        body (MirrorSyncRequest): `POST /api/billing/mirror-sync`: one subscription's state, as an
            operator or a service read it
            from Stripe. Upserted by `stripe_subscription_id`.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorBody | SubscriptionResponse]
    """

    kwargs = _get_kwargs(
        body=body,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    *,
    client: AuthenticatedClient,
    body: MirrorSyncRequest,
) -> ErrorBody | SubscriptionResponse | None:
    """Upsert a subscription mirror (operators)

     Writes one subscription's state, as an operator or a service read it from Stripe, into the mirror,
    upserted by `stripe_subscription_id`. Idempotent by itself: the same body twice leaves one row with
    the same state. `422 invalid_subscription` for an unknown status, a malformed Stripe id or a
    `user_id` that names no user.

    Args:
        body (MirrorSyncRequest): `POST /api/billing/mirror-sync`: one subscription's state, as an
            operator or a service read it
            from Stripe. Upserted by `stripe_subscription_id`.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ErrorBody | SubscriptionResponse
    """

    return sync_detailed(
        client=client,
        body=body,
    ).parsed


async def asyncio_detailed(
    *,
    client: AuthenticatedClient,
    body: MirrorSyncRequest,
) -> Response[ErrorBody | SubscriptionResponse]:
    """Upsert a subscription mirror (operators)

     Writes one subscription's state, as an operator or a service read it from Stripe, into the mirror,
    upserted by `stripe_subscription_id`. Idempotent by itself: the same body twice leaves one row with
    the same state. `422 invalid_subscription` for an unknown status, a malformed Stripe id or a
    `user_id` that names no user.

    Args:
        body (MirrorSyncRequest): `POST /api/billing/mirror-sync`: one subscription's state, as an
            operator or a service read it
            from Stripe. Upserted by `stripe_subscription_id`.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorBody | SubscriptionResponse]
    """

    kwargs = _get_kwargs(
        body=body,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    *,
    client: AuthenticatedClient,
    body: MirrorSyncRequest,
) -> ErrorBody | SubscriptionResponse | None:
    """Upsert a subscription mirror (operators)

     Writes one subscription's state, as an operator or a service read it from Stripe, into the mirror,
    upserted by `stripe_subscription_id`. Idempotent by itself: the same body twice leaves one row with
    the same state. `422 invalid_subscription` for an unknown status, a malformed Stripe id or a
    `user_id` that names no user.

    Args:
        body (MirrorSyncRequest): `POST /api/billing/mirror-sync`: one subscription's state, as an
            operator or a service read it
            from Stripe. Upserted by `stripe_subscription_id`.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ErrorBody | SubscriptionResponse
    """

    return (
        await asyncio_detailed(
            client=client,
            body=body,
        )
    ).parsed
