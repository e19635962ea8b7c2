from http import HTTPStatus
from typing import Any

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.error_body import ErrorBody
from ...models.receive_stripe_webhook_body import ReceiveStripeWebhookBody
from ...models.webhook_ack import WebhookAck
from ...types import Response


def _get_kwargs(
    *,
    body: ReceiveStripeWebhookBody,
    stripe_signature: str,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}
    headers["Stripe-Signature"] = stripe_signature

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/api/billing/webhooks/stripe",
    }

    _kwargs["json"] = body.to_dict()

    headers["Content-Type"] = "application/json"

    _kwargs["headers"] = headers
    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> ErrorBody | WebhookAck | None:
    if response.status_code == 200:
        response_200 = WebhookAck.from_dict(response.json())

        return response_200

    if response.status_code == 400:
        response_400 = ErrorBody.from_dict(response.json())

        return response_400

    if response.status_code == 413:
        response_413 = ErrorBody.from_dict(response.json())

        return response_413

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
) -> Response[ErrorBody | WebhookAck]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    *,
    client: AuthenticatedClient | Client,
    body: ReceiveStripeWebhookBody,
    stripe_signature: str,
) -> Response[ErrorBody | WebhookAck]:
    """Receive a Stripe event

     Stripe's webhook endpoint: no bearer token, `Stripe-Signature` authenticates the raw body. Each
    event is recorded and applied once (subscription and customer events update the mirror); a
    redelivery answers `duplicate: true` and changes nothing. `400 invalid_signature` for a missing,
    wrong or stale signature, `400 invalid_payload` for a body that is not an event.

    Args:
        stripe_signature (str):
        body (ReceiveStripeWebhookBody):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorBody | WebhookAck]
    """

    kwargs = _get_kwargs(
        body=body,
        stripe_signature=stripe_signature,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    *,
    client: AuthenticatedClient | Client,
    body: ReceiveStripeWebhookBody,
    stripe_signature: str,
) -> ErrorBody | WebhookAck | None:
    """Receive a Stripe event

     Stripe's webhook endpoint: no bearer token, `Stripe-Signature` authenticates the raw body. Each
    event is recorded and applied once (subscription and customer events update the mirror); a
    redelivery answers `duplicate: true` and changes nothing. `400 invalid_signature` for a missing,
    wrong or stale signature, `400 invalid_payload` for a body that is not an event.

    Args:
        stripe_signature (str):
        body (ReceiveStripeWebhookBody):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ErrorBody | WebhookAck
    """

    return sync_detailed(
        client=client,
        body=body,
        stripe_signature=stripe_signature,
    ).parsed


async def asyncio_detailed(
    *,
    client: AuthenticatedClient | Client,
    body: ReceiveStripeWebhookBody,
    stripe_signature: str,
) -> Response[ErrorBody | WebhookAck]:
    """Receive a Stripe event

     Stripe's webhook endpoint: no bearer token, `Stripe-Signature` authenticates the raw body. Each
    event is recorded and applied once (subscription and customer events update the mirror); a
    redelivery answers `duplicate: true` and changes nothing. `400 invalid_signature` for a missing,
    wrong or stale signature, `400 invalid_payload` for a body that is not an event.

    Args:
        stripe_signature (str):
        body (ReceiveStripeWebhookBody):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorBody | WebhookAck]
    """

    kwargs = _get_kwargs(
        body=body,
        stripe_signature=stripe_signature,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    *,
    client: AuthenticatedClient | Client,
    body: ReceiveStripeWebhookBody,
    stripe_signature: str,
) -> ErrorBody | WebhookAck | None:
    """Receive a Stripe event

     Stripe's webhook endpoint: no bearer token, `Stripe-Signature` authenticates the raw body. Each
    event is recorded and applied once (subscription and customer events update the mirror); a
    redelivery answers `duplicate: true` and changes nothing. `400 invalid_signature` for a missing,
    wrong or stale signature, `400 invalid_payload` for a body that is not an event.

    Args:
        stripe_signature (str):
        body (ReceiveStripeWebhookBody):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ErrorBody | WebhookAck
    """

    return (
        await asyncio_detailed(
            client=client,
            body=body,
            stripe_signature=stripe_signature,
        )
    ).parsed
