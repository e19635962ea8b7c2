from http import HTTPStatus
from typing import Any
from urllib.parse import quote

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.error_body import ErrorBody
from ...models.order_response import OrderResponse
from ...types import Response


def _get_kwargs(
    client_order_id: str,
) -> dict[str, Any]:

    _kwargs: dict[str, Any] = {
        "method": "get",
        "url": "/api/trading/orders/by-client-order-id/{client_order_id}".format(
            client_order_id=quote(str(client_order_id), safe=""),
        ),
    }

    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> ErrorBody | OrderResponse | None:
    if response.status_code == 200:
        response_200 = OrderResponse.from_dict(response.json())

        return response_200

    if response.status_code == 401:
        response_401 = ErrorBody.from_dict(response.json())

        return response_401

    if response.status_code == 403:
        response_403 = ErrorBody.from_dict(response.json())

        return response_403

    if response.status_code == 404:
        response_404 = ErrorBody.from_dict(response.json())

        return response_404

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
) -> Response[ErrorBody | OrderResponse]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    client_order_id: str,
    *,
    client: AuthenticatedClient,
) -> Response[ErrorBody | OrderResponse]:
    """Find an order by its client order id

     The order with this `client_order_id` (the one sent, or the one derived from the Idempotency-Key):
    how a client that lost an answer finds out what became of its order. `404 not_found` when the
    account has no such order.

    Args:
        client_order_id (str):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorBody | OrderResponse]
    """

    kwargs = _get_kwargs(
        client_order_id=client_order_id,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    client_order_id: str,
    *,
    client: AuthenticatedClient,
) -> ErrorBody | OrderResponse | None:
    """Find an order by its client order id

     The order with this `client_order_id` (the one sent, or the one derived from the Idempotency-Key):
    how a client that lost an answer finds out what became of its order. `404 not_found` when the
    account has no such order.

    Args:
        client_order_id (str):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ErrorBody | OrderResponse
    """

    return sync_detailed(
        client_order_id=client_order_id,
        client=client,
    ).parsed


async def asyncio_detailed(
    client_order_id: str,
    *,
    client: AuthenticatedClient,
) -> Response[ErrorBody | OrderResponse]:
    """Find an order by its client order id

     The order with this `client_order_id` (the one sent, or the one derived from the Idempotency-Key):
    how a client that lost an answer finds out what became of its order. `404 not_found` when the
    account has no such order.

    Args:
        client_order_id (str):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorBody | OrderResponse]
    """

    kwargs = _get_kwargs(
        client_order_id=client_order_id,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    client_order_id: str,
    *,
    client: AuthenticatedClient,
) -> ErrorBody | OrderResponse | None:
    """Find an order by its client order id

     The order with this `client_order_id` (the one sent, or the one derived from the Idempotency-Key):
    how a client that lost an answer finds out what became of its order. `404 not_found` when the
    account has no such order.

    Args:
        client_order_id (str):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ErrorBody | OrderResponse
    """

    return (
        await asyncio_detailed(
            client_order_id=client_order_id,
            client=client,
        )
    ).parsed
