// The client's authentication options against a node whose data folder holds users.
//
// With `auth: { username, password }` the client creates an API key, then three clients (the
// user's, `auth: { apiKey: <encoded> }` and `auth: { apiKey: { id, api_key } }`) and a fourth
// with the credentials in the node URL each do the same work in an index of their own
// (<prefix>-<name>): index documents, search, open a point in time, walk it with search_after
// and close it. Last, the key is invalidated and the client holding it tries once more.
import { Client } from '@elastic/elasticsearch'
import { args, duplicates, report } from './common.mjs'

const { url, prefix, username, password } = args('url', 'prefix', 'username', 'password')
const DOCS = 60

function clientWith (auth, node = url) {
  return new Client({ node, auth, requestTimeout: 60000, maxRetries: 0 })
}

/** The index, search and PIT work of one client, summed up. */
async function exercise (es, index) {
  const me = await es.security.authenticate()
  await es.indices.create({ index, settings: { number_of_shards: 2 }, mappings: { properties: { n: { type: 'integer' } } } })
  const bulk = await es.helpers.bulk({
    datasource: Array.from({ length: DOCS - 1 }, (_, n) => ({ n })),
    onDocument: (doc) => ({ index: { _index: index, _id: `d${doc.n}` } })
  })
  await es.index({ index, id: `d${DOCS - 1}`, document: { n: DOCS - 1 } })
  await es.indices.refresh({ index })
  const searched = await es.search({ index, query: { range: { n: { gte: 10 } } }, size: 0 })

  const opened = await es.openPointInTime({ index, keep_alive: '1m' })
  const ids = []
  let pitId = opened.id
  let searchAfter
  let pages = 0
  for (;;) {
    const page = await es.search({ pit: { id: pitId, keep_alive: '1m' }, sort: [{ n: 'asc' }], size: 7, search_after: searchAfter })
    if (page.hits.hits.length === 0) break
    pages++
    ids.push(...page.hits.hits.map((hit) => hit._id))
    searchAfter = page.hits.hits.at(-1).sort
    pitId = page.pit_id
  }
  const closed = await es.closePointInTime({ id: pitId })
  return {
    user: me.username,
    type: me.authentication_type,
    apiKeyId: me.api_key?.id ?? null,
    bulk: { successful: bulk.successful, failed: bulk.failed },
    searched: searched.hits.total.value,
    pages,
    walked: ids.length,
    inOrder: ids.every((id, i) => id === `d${i}`),
    duplicates: duplicates(ids),
    closed
  }
}

await report(async () => {
  const basic = clientWith({ username, password })
  const key = await basic.security.createApiKey({ name: `${prefix}-key` })
  const encoded = clientWith({ apiKey: key.encoded })
  const pair = clientWith({ apiKey: { id: key.id, api_key: key.api_key } })
  const withUrl = new URL(url)
  withUrl.username = username
  withUrl.password = password
  const inUrl = clientWith(undefined, withUrl.toString())

  const results = {
    basic: await exercise(basic, `${prefix}-basic`),
    apiKeyEncoded: await exercise(encoded, `${prefix}-encoded`),
    apiKeyPair: await exercise(pair, `${prefix}-pair`),
    urlCredentials: await exercise(inUrl, `${prefix}-url`)
  }
  const invalidated = await basic.security.invalidateApiKey({ ids: [key.id] })
  let afterInvalidation
  try {
    await pair.count({ index: `${prefix}-pair` })
    afterInvalidation = { status: 200 }
  } catch (err) {
    afterInvalidation = { name: err.name, status: err.meta?.statusCode, type: err.meta?.body?.error?.type }
  }
  return { keyId: key.id, results, invalidated: invalidated.invalidated_api_keys, afterInvalidation }
})
