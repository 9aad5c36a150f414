// Shared by the scripts that tests/test_js_clients.py runs: argument reading, the client, the report.
//
// Every script takes the server URL first, prints exactly one JSON object on stdout and exits 0;
// a failure prints {"error": ...} with the response the client got, and exits 1, so the pytest
// side can show what the unmodified client saw.
import { Client } from '@elastic/elasticsearch'

/** The positional arguments after the script name; exits with a usage line when some are missing. */
export function args (...names) {
  const values = process.argv.slice(2)
  if (values.length < names.length) {
    console.error(`usage: node ${process.argv[1]} ${names.join(' ')}`)
    process.exit(2)
  }
  return Object.fromEntries(names.map((name, i) => [name, values[i]]))
}

/** A client configured as a new user would: defaults only (product check, compatibility headers). */
export function client (url) {
  return new Client({ node: url, requestTimeout: 60000, maxRetries: 0 })
}

/** Values that occur more than once, each listed once. */
export function duplicates (values) {
  const seen = new Set()
  const repeated = new Set()
  for (const value of values) {
    if (seen.has(value)) repeated.add(value)
    seen.add(value)
  }
  return [...repeated]
}

/** True when every value is >= (or <=, when descending) the one before it. */
export function ordered (values, descending = false) {
  return values.every((value, i) => i === 0 || (descending ? values[i - 1] >= value : values[i - 1] <= value))
}

/** Run `main`, print its result as JSON; on failure print the error and what the server answered. */
export async function report (main) {
  try {
    console.log(JSON.stringify(await main()))
  } catch (err) {
    console.log(JSON.stringify({
      error: `${err.name}: ${err.message}`,
      status: err.meta?.statusCode ?? null,
      body: err.meta?.body ?? null,
      request: err.meta?.meta?.request?.params ?? null
    }))
    process.exitCode = 1
  }
}
