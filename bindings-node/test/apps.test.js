'use strict'
// What applications use: pipelines, transactions (WATCH; EXEC refused after a failover), per-call
// deadlines and AbortSignal, hints naming the Node API, `await using` (Symbol.asyncDispose) and
// the log callback (no secret in any line), against real topologies.

const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const sr = require('..')
const { Client, ServerError, ConfigError, TimeoutError, ConnectionLostError } = sr
const { startTopology, withDeadline, closedPort } = require('./helpers')

const asyncDispose = typeof Symbol.asyncDispose === 'symbol' ? Symbol.asyncDispose : Symbol.for('nodejs.asyncDispose')

let topo
before(async () => {
  topo = await startTopology()
})
after(async () => {
  await topo?.down()
})

async function waitFor(what, ms, f) {
  const deadline = Date.now() + ms
  for (;;) {
    const v = await f()
    if (v) return v
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise((r) => setTimeout(r, 20))
  }
}

test('a pipeline gives each reply or error in order', async () => {
  const client = await Client.connect(topo.url, { decodeResponses: true })
  try {
    const results = await client.pipeline([
      ['SET', 'node:p', '1'],
      ['INCR', 'node:p'],
      ['HGET', 'node:p', 'f'],
      ['GET', 'node:p'],
    ])
    assert.equal(results.length, 4)
    assert.equal(results[0], 'OK')
    assert.equal(results[1], 2)
    assert.ok(results[2] instanceof ServerError)
    assert.equal(results[2].serverCode, 'WRONGTYPE')
    assert.equal(results[3], '2')
    assert.deepEqual(await client.pipeline([]), [])
    // A command a pipeline can't carry: refused as a whole, nothing sent.
    await assert.rejects(client.pipeline([['INCR', 'node:p'], ['BLPOP', 'node:l', '1']]), ConfigError)
    assert.equal(await client.execute(['GET', 'node:p']), '2')
  } finally {
    await client.close()
  }
})

test('per-call deadlines and AbortSignal on pipelines', async () => {
  const client = await Client.connect(topo.url, { commandTimeoutMs: 10000 })
  try {
    // A command held by CLIENT PAUSE WRITE misses a short deadline. Pauses stay short of the
    // sentinels' down-after (1000 ms): their PUBLISH waits behind them too.
    await client.execute(['CLIENT', 'PAUSE', '500', 'WRITE'])
    await assert.rejects(client.execute(['SET', 'node:paused', '1'], { timeoutMs: 100 }), TimeoutError)
    await assert.rejects(
      client.pipeline([['CLIENT', 'PAUSE', '500', 'WRITE'], ['SET', 'node:paused', '2']], { timeoutMs: 100 }),
      TimeoutError,
    )
    await client.execute(['CLIENT', 'UNPAUSE'], { timeoutMs: 10000 })
    const ac = new AbortController()
    const pending = client.pipeline([['CLIENT', 'PAUSE', '500', 'WRITE'], ['SET', 'node:ab', '1']], { signal: ac.signal })
    ac.abort()
    await assert.rejects(pending, { name: 'AbortError' })
    await client.execute(['CLIENT', 'UNPAUSE'], { timeoutMs: 10000 })
    // An aborted BLPOP is not retried: its connection closes, nobody pops the pushed value.
    const blocked = async () => {
      const list = (await client.execute(['CLIENT', 'LIST'])).toString()
      return list.split('\n').filter((l) => l.includes('cmd=blpop')).length
    }
    const ac2 = new AbortController()
    const blpop = client.execute(['BLPOP', 'node:cancel', '0'], { signal: ac2.signal })
    await waitFor('the BLPOP to reach the server', 10000, async () => (await blocked()) === 1)
    ac2.abort()
    await assert.rejects(blpop, { name: 'AbortError' })
    await waitFor('its connection to close', 10000, async () => (await blocked()) === 0)
    assert.equal(await client.execute(['LPUSH', 'node:cancel', 'x']), 1)
    assert.equal(await client.execute(['LLEN', 'node:cancel']), 1)
  } finally {
    await client.close()
  }
})

test('hints name the Node API', async () => {
  const client = await Client.connect(topo.url)
  try {
    await assert.rejects(client.execute(['MULTI']), (e) => {
      assert.ok(e instanceof ConfigError)
      assert.match(e.message, /client\.transaction\(commands\)/)
      assert.doesNotMatch(e.message, /Client::/)
      return true
    })
  } finally {
    await client.close()
  }
})

test('transactions with WATCH', async () => {
  const client = await Client.connect(topo.url, { decodeResponses: true })
  try {
    await client.execute(['DEL', 'node:tx'])
    assert.deepEqual(await client.transaction([['INCR', 'node:tx'], ['INCR', 'node:tx']], { watch: ['node:tx'] }), [1, 2])
    {
      const tx = await client.beginTransaction()
      assert.match(tx.primary, /^127\.0\.0\.1:\d+$/)
      await tx.watch('node:tx')
      assert.equal(await tx.execute(['GET', 'node:tx']), '2')
      assert.deepEqual(await tx.exec([['INCRBY', 'node:tx', 10]]), [12])
      await assert.rejects(tx.exec([['INCR', 'node:tx']]), ConfigError) // ended
    }
    {
      // A watched key changed by someone else: null, nothing ran.
      const tx = await client.beginTransaction()
      await tx.watch('node:tx')
      await client.execute(['SET', 'node:tx', '100'])
      assert.equal(await tx.exec([['INCR', 'node:tx']]), null)
      assert.equal(await client.execute(['GET', 'node:tx']), '100')
    }
    {
      // Scoped: disposed without exec, nothing runs.
      const tx = await client.beginTransaction()
      await tx[asyncDispose]()
      await assert.rejects(tx.exec([['INCR', 'node:tx']]), ConfigError)
    }
    const replies = await client.transaction([['SET', 'node:tx2', 'a'], ['INCR', 'node:tx2']])
    assert.equal(replies[0], 'OK')
    assert.ok(replies[1] instanceof ServerError)
  } finally {
    await client.close()
  }
})

test('a transaction let go of ends, and close ends the others', async () => {
  require('node:v8').setFlagsFromString('--expose-gc')
  const gc = require('node:vm').runInNewContext('gc')
  const client = await Client.connect(topo.url, { decodeResponses: true })
  const observer = await Client.connect(topo.url, { decodeResponses: true })
  try {
    const connected = async (id) => (await observer.execute(['CLIENT', 'LIST', 'ID', String(id)])).trim() !== ''
    const begin = async () => {
      const tx = await client.beginTransaction()
      return { tx, id: await tx.execute(['CLIENT', 'ID']) }
    }
    const dropped = (await begin()).id
    const { tx: kept, id } = await begin()
    await waitFor('the transaction let go of to end', 20000, async () => {
      gc()
      return !(await connected(dropped))
    })
    assert.ok(await connected(id), 'a transaction still held stays')
    await client.close()
    await waitFor('close to end the transaction', 20000, async () => !(await connected(id)))
    await assert.rejects(kept.exec([['INCR', 'node:tx']]), ConfigError)
  } finally {
    await client.close()
    await observer.close()
  }
})

test('EXEC is refused after a failover: nothing was applied', async () => {
  const own = await startTopology()
  const client = await Client.connect(own.url, { commandTimeoutMs: 10000, decodeResponses: true })
  try {
    await client.execute(['SET', 'node:f', '1'])
    const old = client.topology().primary
    const tx = await client.beginTransaction()
    await tx.watch('node:f')
    await own.cmd('failover')
    await own.cmd(`wait-primary-not ${old.port} 40000`)
    await waitFor('the client to follow', 40000, () => {
      const p = client.topology().primary
      return p && p.port !== old.port
    })
    await assert.rejects(tx.exec([['INCR', 'node:f']]), (e) => {
      assert.ok(e instanceof ConnectionLostError, String(e))
      assert.match(e.message, /nothing was applied/)
      return true
    })
    assert.equal(await client.execute(['GET', 'node:f']), '1')
  } finally {
    await client.close()
    await own.down()
  }
})

test('Symbol.asyncDispose closes the client', async () => {
  const client = await Client.connect(topo.url)
  assert.equal(typeof client[asyncDispose], 'function')
  await client[asyncDispose]()
  assert.equal(client.closed, true)
})

test('log records reach the logger without secrets', async () => {
  const port = await closedPort()
  const records = []
  sr.setLogger((r) => records.push(r), { level: 'trace' })
  const client = Client.open(
    `redis+sentinel://app:pw-Secret-42@127.0.0.1:${port}/svc?sentinel_password=sent-Secret-43`,
    { connectTimeoutMs: 200 },
  )
  try {
    await withDeadline(
      waitFor('a warning about the unreachable sentinel', 30000, () => records.some((r) => r.levelNumber >= 30)),
      35000,
      'log records',
    )
  } finally {
    await client.close()
    sr.setLogger(null)
  }
  for (const r of records) {
    assert.ok(['trace', 'debug', 'info', 'warn', 'error'].includes(r.level), r.level)
    assert.ok(r.target.startsWith('sentinel_recovery'), r.target)
    assert.ok(!r.message.includes('Secret-4'), `a secret reached the log: ${r.message}`)
  }
  assert.throws(() => sr.setLogger(() => {}, { level: 'loud' }), ConfigError)
})
