from http import HTTPStatus
from typing import Any

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.audit_list_response import AuditListResponse
from ...models.error_body import ErrorBody
from ...types import UNSET, Response, Unset


def _get_kwargs(
    *,
    user_id: int,
    limit: int | Unset = UNSET,
    cursor: str | Unset = UNSET,
) -> dict[str, Any]:

    params: dict[str, Any] = {}

    params["user_id"] = user_id

    params["limit"] = limit

    params["cursor"] = cursor

    params = {k: v for k, v in params.items() if v is not UNSET and v is not None}

    _kwargs: dict[str, Any] = {
        "method": "get",
        "url": "/api/admin/audit",
        "params": params,
    }

    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> AuditListResponse | ErrorBody | None:
    if response.status_code == 200:
        response_200 = AuditListResponse.from_dict(response.json())

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
) -> Response[AuditListResponse | ErrorBody]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    *,
    client: AuthenticatedClient,
    user_id: int,
    limit: int | Unset = UNSET,
    cursor: str | Unset = UNSET,
) -> Response[AuditListResponse | ErrorBody]:
    """Read a user's audit trail (operators)

     Everything the audit log holds for a user (orders, sessions, billing, support actions), newest
    first, a page at a time: pass `next_cursor` back as `cursor`. Reading it is itself audited on the
    same trail (`audit.read`). `400 invalid_query` for a bad parameter or cursor.

    Args:
        user_id (int):
        limit (int | Unset):
        cursor (str | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[AuditListResponse | ErrorBody]
    """

    kwargs = _get_kwargs(
        user_id=user_id,
        limit=limit,
        cursor=cursor,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    *,
    client: AuthenticatedClient,
    user_id: int,
    limit: int | Unset = UNSET,
    cursor: str | Unset = UNSET,
) -> AuditListResponse | ErrorBody | None:
    """Read a user's audit trail (operators)

     Everything the audit log holds for a user (orders, sessions, billing, support actions), newest
    first, a page at a time: pass `next_cursor` back as `cursor`. Reading it is itself audited on the
    same trail (`audit.read`). `400 invalid_query` for a bad parameter or cursor.

    Args:
        user_id (int):
        limit (int | Unset):
        cursor (str | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        AuditListResponse | ErrorBody
    """

    return sync_detailed(
        client=client,
        user_id=user_id,
        limit=limit,
        cursor=cursor,
    ).parsed


async def asyncio_detailed(
    *,
    client: AuthenticatedClient,
    user_id: int,
    limit: int | Unset = UNSET,
    cursor: str | Unset = UNSET,
) -> Response[AuditListResponse | ErrorBody]:
    """Read a user's audit trail (operators)

     Everything the audit log holds for a user (orders, sessions, billing, support actions), newest
    first, a page at a time: pass `next_cursor` back as `cursor`. Reading it is itself audited on the
    same trail (`audit.read`). `400 invalid_query` for a bad parameter or cursor.

    Args:
        user_id (int):
        limit (int | Unset):
        cursor (str | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[AuditListResponse | ErrorBody]
    """

    kwargs = _get_kwargs(
        user_id=user_id,
        limit=limit,
        cursor=cursor,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    *,
    client: AuthenticatedClient,
    user_id: int,
    limit: int | Unset = UNSET,
    cursor: str | Unset = UNSET,
) -> AuditListResponse | ErrorBody | None:
    """Read a user's audit trail (operators)

     Everything the audit log holds for a user (orders, sessions, billing, support actions), newest
    first, a page at a time: pass `next_cursor` back as `cursor`. Reading it is itself audited on the
    same trail (`audit.read`). `400 invalid_query` for a bad parameter or cursor.

    Args:
        user_id (int):
        limit (int | Unset):
        cursor (str | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        AuditListResponse | ErrorBody
    """

    return (
        await asyncio_detailed(
            client=client,
            user_id=user_id,
            limit=limit,
            cursor=cursor,
        )
    ).parsed
