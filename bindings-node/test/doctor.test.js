'use strict'
// addressMap (function and text forms) and doctor(), on a real topology.

const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const { Client, ConfigError, doctor } = require('..')
const { startTopology, waitFor, closedPort } = require('./helpers')

let topo
before(async () => {
  topo = await startTopology()
})
after(async () => {
  await topo?.down()
})

test('an addressMap function maps what sentinels report; one that throws falls back', async () => {
  const port = topo.info.primary.port
  const seen = []
  const addressMap = (reported) => {
    seen.push(reported)
    if (reported.port === port) return { host: 'localhost', port }
    throw new Error('a bug in the map') // replicas: logged, used as reported
  }
  const client = await Client.connect(topo.url, { addressMap })
  try {
    const t = client.topology()
    assert.deepEqual(t.primary, { host: 'localhost', port, announced: { host: '127.0.0.1', port } })
    assert.equal(await client.execute(['SET', 'doctor:mapped', '1']), 'OK')
    const withReplicas = await waitFor(() => {
      const now = client.topology()
      return now.replicas.length > 0 ? now : null
    }, 30000, 'replicas listed')
    for (const r of withReplicas.replicas) {
      assert.equal(r.host, '127.0.0.1')
      assert.equal(r.announced, undefined)
    }
    assert.ok(seen.some((a) => a.host === '127.0.0.1' && a.port === port))
  } finally {
    await client.close()
  }
})

test('the text form maps too, and bad entries are named', async () => {
  const port = topo.info.primary.port
  const client = await Client.connect(topo.url, { addressMap: `127.0.0.1:${port}>localhost:${port}` })
  try {
    assert.equal(client.topology().primary.host, 'localhost')
    assert.equal(await client.execute(['PING']), 'PONG')
  } finally {
    await client.close()
  }
  assert.throws(() => Client.open(topo.url, { addressMap: '10.0.0.5:6379' }), (e) => {
    return e instanceof ConfigError && /address_map entry #1/.test(e.message)
  })
})

test('doctor reports a healthy topology, and names an unreachable sentinel', async () => {
  const report = await doctor(topo.url, { pings: 3 })
  assert.equal(report.status, 'healthy', report.text)
  assert.equal(report.exitCode, 0)
  assert.equal(report.report.schema, 1)
  assert.equal(report.report.service, topo.info.service)
  assert.ok(report.report.sentinels.every((s) => s.ping.samples === 3))
  assert.match(report.text, new RegExp(topo.info.service))

  const port = await closedPort()
  const failed = await doctor(`redis+sentinel://127.0.0.1:${port}/mymaster`, { connectTimeoutMs: 500 })
  assert.equal(failed.status, 'failure')
  assert.equal(failed.exitCode, 2)
  assert.ok(failed.findings.some((f) => f.code === 'sentinel_unreachable' && f.subject === `127.0.0.1:${port}`))
  await assert.rejects(doctor(topo.url, { noSuchOption: 1 }), ConfigError)
})

test('a mapped topology (replicas announcing 127.0.0.99) is followed through a kill -9 failover', async () => {
  // Nothing answered on 127.0.0.99 before the data nodes bound it too (the testkit checks); the
  // map sends the client to 127.0.0.1 and the topology keeps the announced address beside it.
  const announced = '127.0.0.99'
  const own = await startTopology()
  try {
    const { replicas } = await own.cmd(`announce-replicas ${announced}`)
    const addressMap = (a) => (a.host === announced ? { host: '127.0.0.1', port: a.port } : null)
    const mapped = (port) => ({ host: '127.0.0.1', port, announced: { host: announced, port } })
    const client = await Client.connect(own.url, { addressMap, commandTimeoutMs: 5000 })
    try {
      await waitFor(() => {
        const now = client.topology().replicas
        return now.length === replicas.length && now.every((r) => replicas.includes(r.port) && r.announced?.host === announced)
      }, 30000, 'the replicas under their mapped addresses')
      const old = own.info.primary.port
      await own.cmd(`kill9 ${old}`)
      const promoted = await own.cmd(`wait-primary-not ${old} 40000`)
      assert.equal(promoted.host, announced) // what the sentinels report
      await waitFor(() => {
        const p = client.topology().primary
        return p && p.port === promoted.port && p.host === '127.0.0.1' && p.announced?.host === announced
      }, 40000, 'the mapped new primary')
      assert.deepEqual(client.topology().primary, mapped(promoted.port))
      assert.equal(await client.execute(['SET', 'node:mapped:after', '1']), 'OK')
    } finally {
      await client.close()
    }
  } finally {
    await own.down()
  }
})
