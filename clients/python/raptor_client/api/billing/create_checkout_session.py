from http import HTTPStatus
from typing import Any

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.checkout_session_response import CheckoutSessionResponse
from ...models.create_checkout_session_request import CreateCheckoutSessionRequest
from ...models.error_body import ErrorBody
from ...types import UNSET, Response, Unset


def _get_kwargs(
    *,
    body: CreateCheckoutSessionRequest,
    idempotency_key: str | Unset = UNSET,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}
    if not isinstance(idempotency_key, Unset):
        headers["Idempotency-Key"] = idempotency_key

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/api/billing/checkout-sessions",
    }

    _kwargs["json"] = body.to_dict()

    headers["Content-Type"] = "application/json"

    _kwargs["headers"] = headers
    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> CheckoutSessionResponse | ErrorBody | None:
    if response.status_code == 201:
        response_201 = CheckoutSessionResponse.from_dict(response.json())

        return response_201

    if response.status_code == 400:
        response_400 = ErrorBody.from_dict(response.json())

        return response_400

    if response.status_code == 401:
        response_401 = ErrorBody.from_dict(response.json())

        return response_401

    if response.status_code == 403:
        response_403 = ErrorBody.from_dict(response.json())

        return response_403

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

    if response.status_code == 431:
        response_431 = ErrorBody.from_dict(response.json())

        return response_431

    if response.status_code == 500:
        response_500 = ErrorBody.from_dict(response.json())

        return response_500

    if response.status_code == 502:
        response_502 = ErrorBody.from_dict(response.json())

        return response_502

    if response.status_code == 503:
        response_503 = ErrorBody.from_dict(response.json())

        return response_503

    if response.status_code == 504:
        response_504 = ErrorBody.from_dict(response.json())

        return response_504

    if client.raise_on_unexpected_status:
        raise errors.UnexpectedStatus(response.status_code, response.content)
    else:
        return None


def _build_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Response[CheckoutSessionResponse | ErrorBody]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    *,
    client: AuthenticatedClient,
    body: CreateCheckoutSessionRequest,
    idempotency_key: str | Unset = UNSET,
) -> Response[CheckoutSessionResponse | ErrorBody]:
    """Start a subscription checkout

     A Stripe Checkout Session for `price_id` (the user's Stripe customer is created on first use); send
    the user to its `url`. Tier 2: retries with the same Idempotency-Key return the same session. `409
    subscription_active` when one is running; `422 invalid_billing_request` for a bad price id or URL;
    `502`/`504` when Stripe fails; `503 billing_not_configured`.

    Args:
        idempotency_key (str | Unset):
        body (CreateCheckoutSessionRequest): `POST /api/billing/checkout-sessions`.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[CheckoutSessionResponse | ErrorBody]
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
    body: CreateCheckoutSessionRequest,
    idempotency_key: str | Unset = UNSET,
) -> CheckoutSessionResponse | ErrorBody | None:
    """Start a subscription checkout

     A Stripe Checkout Session for `price_id` (the user's Stripe customer is created on first use); send
    the user to its `url`. Tier 2: retries with the same Idempotency-Key return the same session. `409
    subscription_active` when one is running; `422 invalid_billing_request` for a bad price id or URL;
    `502`/`504` when Stripe fails; `503 billing_not_configured`.

    Args:
        idempotency_key (str | Unset):
        body (CreateCheckoutSessionRequest): `POST /api/billing/checkout-sessions`.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        CheckoutSessionResponse | ErrorBody
    """

    return sync_detailed(
        client=client,
        body=body,
        idempotency_key=idempotency_key,
    ).parsed


async def asyncio_detailed(
    *,
    client: AuthenticatedClient,
    body: CreateCheckoutSessionRequest,
    idempotency_key: str | Unset = UNSET,
) -> Response[CheckoutSessionResponse | ErrorBody]:
    """Start a subscription checkout

     A Stripe Checkout Session for `price_id` (the user's Stripe customer is created on first use); send
    the user to its `url`. Tier 2: retries with the same Idempotency-Key return the same session. `409
    subscription_active` when one is running; `422 invalid_billing_request` for a bad price id or URL;
    `502`/`504` when Stripe fails; `503 billing_not_configured`.

    Args:
        idempotency_key (str | Unset):
        body (CreateCheckoutSessionRequest): `POST /api/billing/checkout-sessions`.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[CheckoutSessionResponse | ErrorBody]
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
    body: CreateCheckoutSessionRequest,
    idempotency_key: str | Unset = UNSET,
) -> CheckoutSessionResponse | ErrorBody | None:
    """Start a subscription checkout

     A Stripe Checkout Session for `price_id` (the user's Stripe customer is created on first use); send
    the user to its `url`. Tier 2: retries with the same Idempotency-Key return the same session. `409
    subscription_active` when one is running; `422 invalid_billing_request` for a bad price id or URL;
    `502`/`504` when Stripe fails; `503 billing_not_configured`.

    Args:
        idempotency_key (str | Unset):
        body (CreateCheckoutSessionRequest): `POST /api/billing/checkout-sessions`.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        CheckoutSessionResponse | ErrorBody
    """

    return (
        await asyncio_detailed(
            client=client,
            body=body,
            idempotency_key=idempotency_key,
        )
    ).parsed
