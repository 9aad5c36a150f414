// Walks INDEX with the client's scroll helpers, as their documentation shows them.
//   byDoc:      `scrollSearch` sorted by `_doc`, 500 per page: ids, page sizes, scroll ids, totals.
//   byN:        `scrollDocuments` sorted by `n` descending (the `_source` of each hit, in order).
//   asInt:      `scrollSearch` with `rest_total_hits_as_int`: `hits.total` is a number on every page.
//   stopped:    `scrollSearch` left after its first page through `response.clear()`.
import { args, client, duplicates, ordered, report } from './common.mjs'

const { url, index } = args('url', 'index')
const es = client(url)

async function byDoc () {
  const ids = []
  const pages = []
  const totals = new Set()
  let withScrollId = 0
  for await (const response of es.helpers.scrollSearch({ index, size: 500, sort: ['_doc'] })) {
    pages.push(response.body.hits.hits.length)
    totals.add(JSON.stringify(response.body.hits.total))
    if (typeof response.body._scroll_id === 'string' && response.body._scroll_id) withScrollId++
    for (const hit of response.body.hits.hits) ids.push(hit._id)
  }
  return { count: ids.length, unique: new Set(ids).size, duplicates: duplicates(ids), pages, withScrollId, totals: [...totals] }
}

async function byN () {
  const ns = []
  const params = { index, size: 700, sort: [{ n: 'desc' }], query: { match_all: {} } }
  for await (const source of es.helpers.scrollDocuments(params)) ns.push(source.n)
  return { count: ns.length, unique: new Set(ns).size, duplicates: duplicates(ns), descending: ordered(ns, true), first: ns[0], last: ns.at(-1) }
}

async function asInt () {
  const totals = []
  let count = 0
  const params = { index, size: 1000, rest_total_hits_as_int: true, query: { term: { group: 'g3' } } }
  for await (const response of es.helpers.scrollSearch(params)) {
    totals.push(response.body.hits.total)
    count += response.body.hits.hits.length
  }
  return { count, totals }
}

async function stopped () {
  let pages = 0
  let hits = 0
  for await (const response of es.helpers.scrollSearch({ index, size: 100 })) {
    pages++
    hits += response.body.hits.hits.length
    await response.clear()
  }
  return { pages, hits }
}

await report(async () => ({
  byDoc: await byDoc(),
  byN: await byN(),
  asInt: await asInt(),
  stopped: await stopped()
}))
