"""The API's MCP endpoint driven by the official Python SDK (PyPI `mcp`), for the Rust test `mcp.rs`.

Reads a plan on stdin, `{"url", "token", "revoked", "calls": [{"tool", "arguments"}]}`; lists the
tools and checks their input schemas (names, required arguments, the locale enum); makes each call
over the protocol's newest version, and the first one again over the initialize handshake of older
clients; tries the endpoint without a token and with a revoked one; prints what it saw as one JSON
object, `{"protocol", "legacy_protocol", "calls", "legacy_call", "refused"}`, for the Rust side to
compare with the REST API's answers. A failed check exits non-zero with the reason on stderr.
"""

import asyncio
import json
import sys

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

# Each tool and its required arguments.
TOOLS = {
    "search_companies": [],
    "count_companies": [],
    "get_company": ["cnpj"],
    "get_companies": ["cnpjs"],
    "company_history": ["cnpj"],
    "list_changes": [],
    "watchlist_events": ["watchlist_id"],
    "reference_data": [],
    "list_cities": [],
    "search_partners": [],
    "get_partner": ["partner_id"],
    "company_network": ["cnpj"],
}


def check_schemas(tools):
    names = sorted(tool.name for tool in tools)
    assert names == sorted(TOOLS), f"tools: {names}"
    for tool in tools:
        schema = tool.input_schema
        assert tool.description, f"{tool.name} has no description"
        assert schema["type"] == "object", f"{tool.name}: {schema}"
        required = sorted(schema.get("required", []))
        assert required == TOOLS[tool.name], f"{tool.name} requires {required}"
        locales = [v for v in schema["properties"]["locale"]["enum"] if v is not None]
        assert locales == ["pt-br", "en", "es"], f"{tool.name}: locale {locales}"


def seen(result):
    """A tool result as the Rust side compares it."""
    texts = [block.text for block in result.content if block.type == "text"]
    return {"is_error": bool(result.is_error), "structured": result.structured_content, "texts": texts}


async def session(plan, token, mode, work):
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx2.AsyncClient(headers=headers, timeout=30) as http:
        async with Client(streamable_http_client(plan["url"], http_client=http), mode=mode) as client:
            return await work(client)


async def modern(plan):
    async def work(client):
        check_schemas((await client.list_tools()).tools)
        calls = []
        for call in plan["calls"]:
            calls.append(seen(await client.call_tool(call["tool"], call["arguments"])))
        return client.protocol_version, calls

    return await session(plan, plan["token"], "auto", work)


async def legacy(plan):
    async def work(client):
        check_schemas((await client.list_tools()).tools)
        first = plan["calls"][0]
        return client.protocol_version, seen(await client.call_tool(first["tool"], first["arguments"]))

    return await session(plan, plan["token"], "legacy", work)


async def refused(plan, token):
    """What the SDK and the HTTP answer say when `token` (or none) is refused."""
    try:
        await session(plan, token, "auto", lambda client: client.list_tools())
        error = None
    except Exception as e:  # the SDK's error, whatever its class
        error = repr(e)
    headers = {"Accept": "application/json, text/event-stream"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    message = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    async with httpx2.AsyncClient(timeout=30) as http:
        reply = await http.post(plan["url"], json=message, headers=headers)
    return {
        "sdk_error": error,
        "status": reply.status_code,
        "www_authenticate": reply.headers.get("www-authenticate"),
        "body": reply.json(),
    }


async def main():
    plan = json.load(sys.stdin)
    protocol, calls = await modern(plan)
    legacy_protocol, legacy_call = await legacy(plan)
    out = {
        "protocol": protocol,
        "legacy_protocol": legacy_protocol,
        "calls": calls,
        "legacy_call": legacy_call,
        "refused": {
            "missing": await refused(plan, None),
            "revoked": await refused(plan, plan["revoked"]),
        },
    }
    json.dump(out, sys.stdout)


asyncio.run(asyncio.wait_for(main(), 120))
