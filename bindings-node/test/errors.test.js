'use strict'
// Every error class, each produced for real where a server (or a fake sentinel) can produce it.

const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const sr = require('..')
const { Client } = sr
const { startTopology, withDeadline, closedPort, fakeSentinel } = require('./helpers')

let topo
before(async () => {
  topo = await startTopology()
})
after(async () => {
  await topo?.down()
})

function isError(Class, code) {
  return (e) => {
    assert.ok(e instanceof Class, `expected ${Class.name}, got ${e && e.name}: ${e && e.message}`)
    assert.ok(e instanceof sr.SentinelRecoveryError)
    assert.ok(e instanceof Error)
    assert.equal(e.code, code)
    assert.equal(e.name, Class.name)
    return true
  }
}

test('one class per stable code, all SentinelRecoveryError', () => {
  // The full comparison with the core's list is in tables.test.js.
  const codes = [
    'config', 'sentinels_unreachable', 'service_unknown', 'no_healthy_primary', 'timeout',
    'connection_lost', 'server', 'protocol', 'tls', 'auth', 'closed', 'queue_full', 'internal',
    'not_replicated',
  ]
  assert.deepEqual(Object.keys(sr.ERROR_CLASSES), codes)
  for (const code of codes) {
    const Class = sr.ERROR_CLASSES[code]
    const e = new Class('m', code)
    assert.ok(e instanceof sr.SentinelRecoveryError)
    assert.equal(e.code, code)
  }
})

test('config: bad URL and bad option, thrown by open and rejected by connect', async () => {
  assert.throws(() => Client.open('redis://127.0.0.1:6379'), isError(sr.ConfigError, 'config'))
  assert.throws(
    () => Client.open('redis+sentinel://127.0.0.1:26379/m', { noSuchOption: 1 }),
    (e) => isError(sr.ConfigError, 'config')(e) && /no_such_option/.test(e.message),
  )
  assert.throws(
    () => Client.open('redis+sentinel://127.0.0.1:26379/m', { commandTimeoutMs: 'soon' }),
    isError(sr.ConfigError, 'config'),
  )
  await assert.rejects(Client.connect('redis+sentinel://:secret@/m'), (e) => {
    isError(sr.ConfigError, 'config')(e)
    assert.ok(!e.message.includes('secret'), 'no password in the message')
    return true
  })
})

test('sentinels_unreachable: nothing listens on the configured sentinel', async () => {
  const port = await closedPort()
  await assert.rejects(
    withDeadline(
      Client.connect(`redis+sentinel://127.0.0.1:${port}/mymaster`, { sentinelTimeoutMs: 300 }),
      15000,
      'connect',
    ),
    isError(sr.SentinelsUnreachableError, 'sentinels_unreachable'),
  )
})

test('service_unknown: real sentinels that do not monitor the service', async () => {
  const url = topo.url.replace(/\/[^/?]+(\?|$)/, '/no-such-service$1')
  await assert.rejects(
    withDeadline(Client.connect(url), 15000, 'connect'),
    isError(sr.ServiceUnknownError, 'service_unknown'),
  )
})

test('no_healthy_primary: a sentinel reporting the primary as o_down', async () => {
  const fake = await fakeSentinel((args) => {
    const cmd = args.map((a) => a.toUpperCase())
    if (cmd[0] === 'SENTINEL' && cmd[1] === 'MASTER') {
      return ['name', args[2], 'ip', '127.0.0.1', 'port', '1', 'runid', 'x', 'flags', 'master,s_down,o_down', 'config-epoch', '1']
    }
    if (cmd[0] === 'PING') return 'PONG'
    return undefined
  })
  try {
    await assert.rejects(
      withDeadline(
        Client.connect(`redis+sentinel://127.0.0.1:${fake.port}/mymaster`, { sentinelTimeoutMs: 500 }),
        15000,
        'connect',
      ),
      isError(sr.NoHealthyPrimaryError, 'no_healthy_primary'),
    )
  } finally {
    await fake.close()
  }
})

test('timeout and queue_full: commands waiting for a primary that is never found', async () => {
  const port = await closedPort()
  const url = `redis+sentinel://127.0.0.1:${port}/mymaster`
  const waiting = Client.open(url, { commandTimeoutMs: 200, sentinelTimeoutMs: 100 })
  const full = Client.open(url, { queueSize: 0, sentinelTimeoutMs: 100 })
  try {
    await assert.rejects(
      withDeadline(waiting.execute(['GET', 'k']), 10000, 'execute'),
      isError(sr.TimeoutError, 'timeout'),
    )
    await assert.rejects(
      withDeadline(full.execute(['GET', 'k']), 10000, 'execute'),
      isError(sr.QueueFullError, 'queue_full'),
    )
  } finally {
    await waiting.close()
    await full.close()
  }
})

test('server and auth: error replies keep the server code', async () => {
  const c = await Client.connect(topo.url)
  try {
    await assert.rejects(c.execute(['NO-SUCH-COMMAND']), (e) => {
      isError(sr.ServerError, 'server')(e)
      assert.equal(e.serverCode, 'ERR')
      return true
    })
    await c.execute(['SET', 'errors:str', 'x'])
    await assert.rejects(c.execute(['LPUSH', 'errors:str', 'y']), (e) => {
      isError(sr.ServerError, 'server')(e)
      assert.equal(e.serverCode, 'WRONGTYPE')
      return true
    })
    // Transactions can't run on the shared connection: refused before sending, as config.
    await assert.rejects(c.execute(['EXEC']), isError(sr.ConfigError, 'config'))
  } finally {
    await c.close()
  }
})

test('auth: a data-node user with the wrong password', async () => {
  const admin = await Client.connect(topo.url)
  try {
    await admin.execute(['ACL', 'SETUSER', 'node-suite', 'on', '>right-password', '~*', '+@all'])
    await assert.rejects(
      withDeadline(
        Client.connect(topo.url, { username: 'node-suite', password: 'wrong-password' }),
        15000,
        'connect',
      ),
      (e) => {
        isError(sr.AuthError, 'auth')(e)
        assert.ok(!e.message.includes('wrong-password'), 'no password in the message')
        return true
      },
    )
    const ok = await Client.connect(topo.url, { username: 'node-suite', password: 'right-password' })
    assert.equal(String(await ok.execute(['ACL', 'WHOAMI'])), 'node-suite')
    await ok.close()
  } finally {
    await admin.close()
  }
})

test('protocol: a sentinel answering garbage', async () => {
  const net = require('node:net')
  const server = net.createServer((s) => {
    s.on('error', () => {})
    s.on('data', () => s.write('?this is not RESP\r\n'))
  })
  await new Promise((r) => server.listen(0, '127.0.0.1', r))
  try {
    await assert.rejects(
      withDeadline(
        Client.connect(`redis+sentinel://127.0.0.1:${server.address().port}/mymaster`, {
          sentinelTimeoutMs: 500,
        }),
        15000,
        'connect',
      ),
      (e) => {
        // Discovery reports the case (no sentinel gave a usable answer); the protocol error is
        // the cause named in the message.
        assert.ok(e instanceof sr.SentinelRecoveryError, String(e))
        assert.ok(['protocol', 'sentinels_unreachable'].includes(e.code), e.code)
        return true
      },
    )
  } finally {
    server.close()
  }
})

test('tls: a TLS handshake against a plain-text sentinel fails as tls or unreachable', async () => {
  await assert.rejects(
    withDeadline(Client.connect(topo.url, { tls: true, sentinelTimeoutMs: 500 }), 15000, 'connect'),
    (e) => {
      assert.ok(e instanceof sr.SentinelRecoveryError, String(e))
      assert.ok(['tls', 'sentinels_unreachable'].includes(e.code), `${e.code}: ${e.message}`)
      return true
    },
  )
})

test('closed: commands after close() reject with ClosedError', async () => {
  const c = await Client.connect(topo.url)
  await c.close()
  await c.close() // idempotent
  await assert.rejects(c.execute(['PING']), isError(sr.ClosedError, 'closed'))
})

test('connection_lost: the primary dies with a command in flight', async () => {
  const c = await Client.connect(topo.url, { commandTimeoutMs: 20000 })
  try {
    const primary = topo.info.primary.port
    // The server is running this command (it has read it) when it dies: the client can't know
    // whether it ran, so it must not retry it.
    const inFlight = c.execute(['DEBUG', 'SLEEP', '5'])
    // Handled at once: it may reject before the kill9 answer is read.
    const outcome = inFlight.then(
      () => new Error('resolved'),
      (e) => e,
    )
    await new Promise((r) => setTimeout(r, 300))
    assert.equal((await topo.cmd(`kill9 ${primary}`)).ok, true)
    const e = await withDeadline(outcome, 15000, 'in-flight command')
    isError(sr.ConnectionLostError, 'connection_lost')(e)
  } finally {
    await c.close()
  }
})
