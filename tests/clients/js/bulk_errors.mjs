// `client.helpers.bulk` reading per-item failures: into INDEX (made by bulk_load.mjs, so d1 exists
// and `n` is an integer) it sends two good documents, one `create` of an existing id and one
// document whose `n` is not a number; the helper must drop exactly those two, with their causes.
import { args, client, report } from './common.mjs'

const { url, index } = args('url', 'index')
const es = client(url)

const operations = [
  { op: 'index', id: 'extra-1', doc: { n: 100001, group: 'g1', title: 'good' } },
  { op: 'create', id: 'd1', doc: { n: 1, group: 'g1', title: 'already there' } },
  { op: 'index', id: 'bad-n', doc: { n: 'not a number', group: 'g2', title: 'bad' } },
  { op: 'create', id: 'extra-2', doc: { n: 100002, group: 'g2', title: 'good' } }
]

await report(async () => {
  const dropped = []
  const stats = await es.helpers.bulk({
    datasource: operations,
    refreshOnCompletion: index,
    onDocument: ({ op, id, doc }) => [{ [op]: { _index: index, _id: id } }, doc],
    onDrop: ({ status, error, document }) => dropped.push({ status, type: error?.type, reason: error?.reason, title: document.title })
  })
  const found = await es.mget({ index, ids: ['extra-1', 'extra-2', 'bad-n'] })
  return {
    total: stats.total,
    successful: stats.successful,
    failed: stats.failed,
    dropped,
    found: Object.fromEntries(found.docs.map((doc) => [doc._id, doc.found])),
    d1Title: (await es.get({ index, id: 'd1' }))._source.title
  }
})
