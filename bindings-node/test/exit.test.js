'use strict'
// The process exits by itself: after close(), and with events subscribed; a pending command keeps
// it alive until it settles, and nothing else does.

const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const { spawn } = require('node:child_process')
const path = require('node:path')
const { startTopology } = require('./helpers')

let topo
before(async () => {
  topo = await startTopology()
})
after(async () => {
  await topo?.down()
})

/** Runs `code` in a child node; resolves {code, stdout} or rejects after `ms`. */
function runChild(code, ms = 20000) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['-e', code], {
      env: { ...process.env, SR_URL: topo.url, SR_MODULE: path.resolve(__dirname, '..') },
      stdio: ['ignore', 'pipe', 'inherit'],
    })
    let stdout = ''
    child.stdout.on('data', (d) => (stdout += d))
    const timer = setTimeout(() => {
      child.kill('SIGKILL')
      reject(new Error(`child did not exit within ${ms} ms; stdout: ${stdout}`))
    }, ms)
    child.on('exit', (code) => {
      clearTimeout(timer)
      resolve({ code, stdout })
    })
  })
}

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
  `)
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
  `)
  assert.equal(r.code, 0)
  assert.equal(r.stdout.trim(), 'settled OK')
})
