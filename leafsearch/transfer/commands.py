"""The `export` and `import` commands of the command line (registered by `leafsearch.cli`)."""

from __future__ import annotations

import contextlib
import functools
import json
import os
import signal
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from leafsearch.transfer.client import Client

DEFAULT_URL = "http://127.0.0.1:9200"


def _connection_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """--url/--data and the credentials, shared by export and import."""
    options = [
        click.option(
            "--url",
            default=DEFAULT_URL,
            show_default=True,
            envvar="LEAFSEARCH_URL",
            show_envvar=True,
            help="Any Elasticsearch-compatible server.",
        ),
        click.option(
            "--data",
            type=click.Path(file_okay=False),
            help="Work directly on this leafsearch data folder (no server may hold it) instead of --url.",
        ),
        click.option(
            "--user",
            envvar="LEAFSEARCH_USER",
            show_envvar=True,
            metavar="NAME:PASSWORD",
            help="Basic authentication.",
        ),
        click.option("--api-key", envvar="LEAFSEARCH_API_KEY", show_envvar=True, help="An encoded API key."),
        click.option(
            "--ca-cert", type=click.Path(dir_okay=False, exists=True), help="PEM CA certificate for https."
        ),
        click.option("--no-verify-tls", is_flag=True, help="Do not verify the server's certificate."),
        click.option("--quiet", "-q", is_flag=True, help="No progress bar (it is shown only on a terminal)."),
    ]
    for option in reversed(options):
        command = option(command)
    return command


@contextmanager
def _client(
    url: str,
    data: str | None,
    user: str | None,
    api_key: str | None,
    ca_cert: str | None,
    no_verify: bool,
    connections: int,
) -> Iterator[Client]:
    from leafsearch.transfer.client import Client
    from leafsearch.transfer.local import served_data_folder

    verify: bool | str = False if no_verify else (ca_cert or True)
    if data is None:
        client = Client(url, user=user, api_key=api_key, verify=verify, connections=connections)
        try:
            yield client
        finally:
            client.close()
        return
    with served_data_folder(data) as local_url:
        client = Client(local_url, connections=connections)
        try:
            yield client
        finally:
            client.close()


def _reported(command: Callable[..., Any]) -> Callable[..., Any]:
    """A `TransferError` ends the command with its message and status 1; Ctrl-C with status 130."""

    @functools.wraps(command)
    def run(*args: Any, **kwargs: Any) -> Any:
        from leafsearch.transfer.client import TransferError

        try:
            return command(*args, **kwargs)
        except TransferError as exc:
            click.echo(f"leafsearch: {exc}", err=True)
            sys.exit(1)
        except KeyboardInterrupt:
            click.echo("leafsearch: interrupted", err=True)
            sys.exit(130)

    return run


def _json_option(value: str | None, name: str) -> Any:
    """A JSON value given inline or as `@file`."""
    if value is None:
        return None
    try:
        if value.startswith("@"):
            with open(value[1:], encoding="utf-8") as handle:
                return json.load(handle)
        return json.loads(value)
    except (OSError, ValueError) as exc:
        raise click.BadParameter(str(exc), param_hint=name) from None


@click.command("export")
@click.argument("index")
@click.argument("file", default="-")
@_connection_options
@click.option("--query", help='A query as JSON ({"match": ...}) or @file.json; default every document.')
@click.option("--sort", help='Sort, e.g. "@timestamp:desc,id" (default: _shard_doc, the fastest).')
@click.option("--source", "source_includes", help="Source fields to keep (comma list), or false.")
@click.option("--source-excludes", help="Source fields to drop (comma list).")
@click.option("--size", default=1000, show_default=True, type=click.IntRange(1, 10000), help="Hits per page.")
@click.option("--slices", default=1, show_default=True, type=click.IntRange(1, 128), help="Read in parallel.")
@click.option("--split", is_flag=True, help="With --slices: one file per slice (FILE.N.ext) instead of one.")
@click.option(
    "--keep-alive",
    default="1h",
    show_default=True,
    help="How long the point in time lives between pages; "
    "an interrupted export can be resumed within that time.",
)
@click.option("--resume", is_flag=True, help="Continue the interrupted export to FILE where it stopped.")
@_reported
def export_command(
    index: str,
    file: str,
    url: str,
    data: str | None,
    user: str | None,
    api_key: str | None,
    ca_cert: str | None,
    no_verify_tls: bool,
    quiet: bool,
    query: str | None,
    sort: str | None,
    source_includes: str | None,
    source_excludes: str | None,
    size: int,
    slices: int,
    split: bool,
    keep_alive: str,
    resume: bool,
) -> None:
    """Export the documents of INDEX to FILE as NDJSON (`-`, the default, is standard output).

    FILE ending in .gz or .zst is compressed. Each line is {"_index", "_id", "_source"}, the format
    `leafsearch import` and elasticdump read. The export reads a point in time, so documents
    written meanwhile do not change what it exports."""
    from leafsearch.transfer.client import TransferError
    from leafsearch.transfer.export import (
        Exporter,
        ExportPlan,
        load_state,
        parse_sort,
        parse_source,
        state_path,
    )

    if resume and file == "-":
        raise click.UsageError("--resume needs a FILE (standard output cannot be continued)")
    if split and file == "-":
        raise click.UsageError("--split needs a FILE")
    state = load_state(file) if resume else None
    if state is not None and state.plan.index != index:
        raise click.UsageError(f"{file} is an export of [{state.plan.index}], not [{index}]")
    # one connection per slice (the saved plan's when resuming) and one for the rest
    connections = (state.plan.slices if state is not None else slices) + 1
    started = time.monotonic()
    with (
        _terminated_as_interrupt(),
        _client(url, data, user, api_key, ca_cert, no_verify_tls, connections) as client,
    ):
        if state is not None:
            exporter = Exporter(client, state, quiet=quiet)
        else:
            plan = ExportPlan(
                index=index,
                output=file,
                query=_json_option(query, "--query"),
                sort=parse_sort(sort),
                source=parse_source(source_includes, source_excludes),
                size=size,
                slices=slices,
                split=split,
                keep_alive=keep_alive,
            )
            exporter = Exporter.start(client, plan, quiet=quiet)
        hint = (
            f"to continue: leafsearch export {index} {file} --resume "
            f"(within --keep-alive, {exporter.plan.keep_alive})"
        )
        try:
            written = exporter.run()
        except TransferError as exc:
            if data is not None and exc.type == "search_context_missing_exception":
                raise TransferError(
                    "an export of a data folder reads a point in time of the process that ran it, "
                    "which ended with it: start the export again without --resume"
                ) from None
            if _resumable(state_path(file), data) and exc.type != "search_context_missing_exception":
                raise TransferError(f"{exc}\n{hint}", exc.type, exc.status) from None
            raise
        except KeyboardInterrupt:
            resumable = _resumable(state_path(file), data)
            click.echo(f"leafsearch: interrupted{chr(10) + hint if resumable else ''}", err=True)
            sys.exit(130)
        except BrokenPipeError:  # `export | head`: the reader has what it wanted (the PIT is closed)
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            sys.exit(141)
    seconds = time.monotonic() - started
    total = sum(exporter.state.written)
    rate = written / seconds if seconds else 0
    this_run = f"{written:,} in this run, " if total != written else ""
    click.echo(
        f"exported {total:,} {_documents(total)} of [{index}] ({this_run}{seconds:.1f}s, {rate:,.0f} docs/s)",
        err=True,
    )


def _resumable(state_file: str, data: str | None) -> bool:
    """Whether an interrupted command can be continued with --resume: it recorded its state, and
    it did not run on a data folder (whose node, and point in time, ended with the command)."""
    return data is None and os.path.exists(state_file)


def _documents(n: int) -> str:
    return "document" if n == 1 else "documents"


@contextmanager
def _terminated_as_interrupt() -> Iterator[None]:
    """SIGTERM ends the command as Ctrl-C does: state saved, files closed, the way to resume said."""

    def interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@click.command("import")
@click.argument("file")
@click.argument("index")
@_connection_options
@click.option(
    "--mapping",
    type=click.Path(dir_okay=False, exists=True),
    help='Create INDEX first from this JSON file: a mapping ({"properties": ...}) or a create-index '
    'body ({"settings", "mappings"}). Default: FILE.index.json, written by `leafsearch export`, '
    "when INDEX does not exist yet.",
)
@click.option("--no-mapping", is_flag=True, help="Do not create INDEX from FILE.index.json.")
@click.option(
    "--workers", default=4, show_default=True, type=click.IntRange(1, 64), help="Bulk requests in parallel."
)
@click.option(
    "--chunk", default=5000, show_default=True, type=click.IntRange(1), help="Documents per bulk request."
)
@click.option(
    "--errors",
    "errors_path",
    type=click.Path(dir_okay=False),
    help="Where failed items are written "
    "(default: FILE.errors.ndjson, or import-errors.ndjson for standard input).",
)
@click.option("--resume", is_flag=True, help="Continue the interrupted import of FILE where it stopped.")
@_reported
def import_command(
    file: str,
    index: str,
    url: str,
    data: str | None,
    user: str | None,
    api_key: str | None,
    ca_cert: str | None,
    no_verify_tls: bool,
    quiet: bool,
    mapping: str | None,
    no_mapping: bool,
    workers: int,
    chunk: int,
    errors_path: str | None,
    resume: bool,
) -> None:
    """Import the NDJSON FILE (`-`: standard input; .gz/.zst decompressed) into INDEX.

    Lines are documents (plain sources, or records as `leafsearch export` writes them) or the
    _bulk format. Exits with status 1 when any item failed; each failure is written to the
    errors file. An interrupted import of a FILE continues with --resume: no document is lost or
    written twice."""
    from leafsearch.transfer.client import InputError, TransferError
    from leafsearch.transfer.files import check_input, definition_path
    from leafsearch.transfer.importer import Importer, create_index, load_definition, load_import_state
    from leafsearch.transfer.importer import state_path as import_state_path

    if resume and file == "-":
        raise click.UsageError("--resume needs a FILE (standard input cannot be continued)")
    if mapping is not None and no_mapping:
        raise click.UsageError("--mapping and --no-mapping exclude each other")
    check_input(file)  # a missing or unreadable FILE is said before anything is done
    state = load_import_state(file) if resume else None
    if state is not None and state.index != index:
        raise click.UsageError(f"{file} was being imported into [{state.index}], not [{index}]")
    errors_path = errors_path or ("import-errors.ndjson" if file == "-" else file + ".errors.ndjson")
    started = time.monotonic()
    hint = f"to continue: leafsearch import {file} {index} --resume"
    with (
        _terminated_as_interrupt(),
        _client(url, data, user, api_key, ca_cert, no_verify_tls, workers + 1) as client,
    ):
        importer = Importer(
            client, index, workers=workers, chunk_docs=chunk, errors_path=errors_path, quiet=quiet
        )
        if state is None and file != "-":
            state = importer.new_state(file)
        if mapping is not None and not resume:
            create_index(client, index, load_definition(mapping))
        elif not no_mapping and file != "-" and os.path.exists(definition_path(file)):
            status, _ = client.request("HEAD", f"/{index}", allow=(404,))
            if status == 404:
                create_index(client, index, load_definition(definition_path(file)))
        try:
            result = importer.run(file, state)
        except KeyboardInterrupt:
            resumable = _resumable(import_state_path(file), None)
            click.echo(f"leafsearch: interrupted{chr(10) + hint if resumable else ''}", err=True)
            sys.exit(130)
        except InputError:
            if state is not None and state.done_below == 0 and not state.acknowledged:  # nothing sent
                with contextlib.suppress(FileNotFoundError):
                    os.remove(import_state_path(file))
            raise
        except TransferError as exc:
            if not _resumable(import_state_path(file), None):
                raise
            raise TransferError(f"{exc}\n{hint}", exc.type, exc.status) from None
    seconds = time.monotonic() - started
    click.echo(
        f"{result.summary()}\n({seconds:.1f}s, {result.this_run / seconds if seconds else 0:,.0f} docs/s)",
        err=True,
    )
    if result.failed:
        sys.exit(1)
