// What the client throws when the node refuses: a wrong password (401) and a read-only user's
// write (403). Each refusal is reported as the client's error shows it.
import { Client } from '@elastic/elasticsearch'
import { args, report } from './common.mjs'

const { url, index, username, password, viewer, viewerPassword } =
  args('url', 'index', 'username', 'password', 'viewer', 'viewerPassword')

function clientWith (auth) {
  return new Client({ node: url, auth, requestTimeout: 60000, maxRetries: 0 })
}

/** The error `call` throws, as the client reports it; {status: 200} when it does not throw. */
async function refusal (call) {
  try {
    await call()
    return { status: 200 }
  } catch (err) {
    return {
      name: err.name,
      status: err.meta?.statusCode,
      type: err.meta?.body?.error?.type,
      reason: err.meta?.body?.error?.reason,
      challenge: err.meta?.headers?.['www-authenticate'] ?? null
    }
  }
}

await report(async () => {
  const wrong = clientWith({ username, password: `${password}-wrong` })
  const reader = clientWith({ username: viewer, password: viewerPassword })
  return {
    wrongPassword: await refusal(() => wrong.search({ index })),
    wrongApiKey: await refusal(() => clientWith({ apiKey: { id: 'no-such-key', api_key: 'x' } }).info()),
    viewerWrite: await refusal(() => reader.index({ index, id: 'from-viewer', document: { n: -1 } })),
    viewerBulk: (await reader.bulk({ operations: [{ index: { _index: index, _id: 'bulk-viewer' } }, { n: -2 }] })).items,
    viewerCount: (await reader.count({ index })).count,
    viewerFound: await refusal(() => reader.get({ index, id: 'from-viewer' }))
  }
})
