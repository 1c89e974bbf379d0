'use strict'
// Commands, reply conversion, options, topology, ESM entry point and 64 clients on one
// real topology.

const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const { Client, ClosedError, EVENT_KINDS } = require('..')
const { startTopology, withDeadline } = require('./helpers')

let topo
before(async () => {
  topo = await startTopology()
})
after(async () => {
  await topo?.down()
})

test('replies are Buffers by default and strings with decodeResponses', async () => {
  const raw = await Client.connect(topo.url)
  const text = await Client.connect(topo.url, { decodeResponses: true })
  try {
    assert.equal(await raw.execute(['SET', 'basic:k', 'v1']), 'OK')
    const got = await raw.execute(['GET', 'basic:k'])
    assert.ok(Buffer.isBuffer(got))
    assert.equal(got.toString(), 'v1')
    assert.equal(await text.execute(['GET', 'basic:k']), 'v1')
    // Binary-safe arguments and replies.
    const bin = Buffer.from([0, 255, 1, 128])
    await raw.execute([Buffer.from('SET'), 'basic:bin', bin])
    assert.deepEqual(await raw.execute(['GET', 'basic:bin']), bin)
    // Invalid UTF-8 stays a Buffer even when decoding.
    assert.ok(Buffer.isBuffer(await text.execute(['GET', 'basic:bin'])))
    // Numbers as arguments, integers as numbers, nil as null, arrays.
    assert.equal(await text.execute(['INCRBY', 'basic:n', 5]), 5)
    assert.equal(await text.execute(['GET', 'basic:missing']), null)
    await text.execute(['RPUSH', 'basic:list', 'a', 'b'])
    assert.deepEqual(await text.execute(['LRANGE', 'basic:list', 0, -1]), ['a', 'b'])
    // RESP3 maps become Map objects.
    await text.execute(['HSET', 'basic:h', 'f1', 'x', 'f2', 'y'])
    const h = await text.execute(['HGETALL', 'basic:h'])
    const entries = h instanceof Map ? [...h.entries()] : pairs(h)
    assert.deepEqual(entries.sort(), [['f1', 'x'], ['f2', 'y']])
  } finally {
    await raw.close()
    await text.close()
  }
})

function pairs(flat) {
  const out = []
  for (let i = 0; i < flat.length; i += 2) out.push([flat[i], flat[i + 1]])
  return out
}

test('options go through the core: camelCase and snake_case keys, protocol 2', async () => {
  const c = await Client.connect(topo.url, {
    decodeResponses: true,
    clientName: 'node-suite',
    protocol: 2,
    command_timeout_ms: 4000,
  })
  try {
    assert.equal(await c.execute(['CLIENT', 'GETNAME']), 'node-suite')
    await c.execute(['HSET', 'basic:h2', 'f', 'v'])
    // RESP2: HGETALL is a flat array.
    assert.deepEqual(await c.execute(['HGETALL', 'basic:h2']), ['f', 'v'])
  } finally {
    await c.close()
  }
})

test('topology snapshot has the DESIGN fields and matches the sentinels', async () => {
  const c = await Client.connect(topo.url)
  try {
    const t = c.topology()
    assert.equal(t.service, topo.info.service)
    assert.deepEqual(t.primary, { host: '127.0.0.1', port: topo.info.primary.port })
    assert.equal(t.healthy, true)
    assert.equal(typeof t.epoch, 'number')
    assert.equal(t.sentinels.length, topo.info.sentinels.length)
    for (const s of t.sentinels) {
      // DESIGN: sentinels (host, port, up, tilt, knows_service).
      assert.deepEqual(Object.keys(s).sort(), ['host', 'knows_service', 'port', 'tilt', 'up'])
    }
    assert.ok(Array.isArray(t.replicas))
    assert.equal(c.closed, false)
  } finally {
    await c.close()
  }
  assert.equal(c.closed, true)
  assert.throws(() => c.topology(), ClosedError)
})

test('events: the first discovery is a primary_changed from null, emitted under its kind too', async () => {
  const c = Client.open(topo.url)
  const all = []
  const named = []
  c.on('event', (e) => all.push(e))
  c.on('primary_changed', (e) => named.push(e))
  try {
    // Open returned at once; wait for the event itself (a state), not a fixed time.
    await withDeadline(
      new Promise((resolve) => c.once('primary_changed', resolve)),
      15000,
      'first primary_changed',
    )
    const first = all.find((e) => e.kind === 'primary_changed')
    assert.ok(first, 'a primary_changed event')
    assert.equal(first.old, null)
    assert.deepEqual(first.new, { host: '127.0.0.1', port: topo.info.primary.port })
    assert.equal(first.service, topo.info.service)
    assert.equal(typeof first.at, 'number')
    assert.ok(Math.abs(first.at - Date.now()) < 60000)
    assert.deepEqual(named[0], first)
    for (const e of all) assert.ok(EVENT_KINDS.includes(e.kind), e.kind)
  } finally {
    await c.close()
  }
  const count = all.length
  await new Promise((r) => setTimeout(r, 100))
  assert.equal(all.length, count, 'no event after close() resolved')
})

test('events: a client sharing a monitor that knows the primary hears it first too', async () => {
  // Same sentinels and service: the second client shares the first one's monitor, whose first
  // discovery is over before the second client exists.
  const ready = await Client.connect(topo.url)
  const c = Client.open(topo.url, { db: 1 })
  try {
    const first = await withDeadline(
      new Promise((resolve) => c.once('primary_changed', resolve)),
      15000,
      'primary_changed of the second client',
    )
    assert.equal(first.old, null)
    assert.deepEqual(first.new, { host: '127.0.0.1', port: topo.info.primary.port })
  } finally {
    await c.close()
    await ready.close()
  }
})

test('ESM entry point exports the same classes', async () => {
  const esm = await import('../index.mjs')
  const cjs = require('..')
  assert.equal(esm.Client, cjs.Client)
  assert.equal(esm.ServerError, cjs.ServerError)
  assert.equal(esm.default, cjs)
})

test('64 clients in one process share the work and each runs commands', async () => {
  const clients = await Promise.all(
    Array.from({ length: 64 }, () => Client.connect(topo.url, { decodeResponses: true })),
  )
  try {
    await Promise.all(clients.map((c, i) => c.execute(['SET', `basic:many:${i}`, `v${i}`])))
    const got = await Promise.all(clients.map((c, i) => c.execute(['GET', `basic:many:${i}`])))
    assert.deepEqual(
      got,
      clients.map((_, i) => `v${i}`),
    )
    // Concurrent commands on every client at once.
    const replies = await Promise.all(
      clients.flatMap((c) => Array.from({ length: 20 }, () => c.execute(['INCR', 'basic:many:n']))),
    )
    assert.equal(Math.max(...replies), 64 * 20)
    for (const c of clients) assert.equal(c.topology().primary.port, topo.info.primary.port)
  } finally {
    await Promise.all(clients.map((c) => c.close()))
  }
})
