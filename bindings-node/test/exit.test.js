'use strict'
// The process exits by itself: after close(), and with events subscribed; a pending command keeps
// it alive until it settles, and nothing else does.

const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const { startTopology, runChild } = require('./helpers')

let topo
before(async () => {
  topo = await startTopology()
})
after(async () => {
  await topo?.down()
})

test('exits with code 0 after connect, a command and close()', async () => {
  const r = await runChild(`
    const { Client } = require(process.env.SR_MODULE)
    ;(async () => {
      const c = await Client.connect(process.env.SR_URL)
      c.on('event', () => {})
      await c.execute(['SET', 'exit:k', 'v'])
      await c.close()
      console.log('closed')
    })()
  `, { SR_URL: topo.url })
  assert.equal(r.code, 0)
  assert.equal(r.stdout.trim(), 'closed')
})

test('a pending command keeps the process alive until it settles; nothing else does', async () => {
  // No await at top level, no timers: only the pending command holds the loop.
  const r = await runChild(`
    const { Client } = require(process.env.SR_MODULE)
    const c = Client.open(process.env.SR_URL)
    c.on('event', () => {})
    c.execute(['DEBUG', 'SLEEP', '0.5']).then((v) => {
      console.log('settled ' + v)
      // Not closed: the open client and its event subscription must not keep the process alive.
    })
  `, { SR_URL: topo.url })
  assert.equal(r.code, 0)
  assert.equal(r.stdout.trim(), 'settled OK')
})
