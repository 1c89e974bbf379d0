'use strict'
// Every promise settles by its deadline, with several clients in the process (issue 10): a kill -9
// of the primary under 16 writers on the first of 2 or 8 clients on one URL, and bursts of
// commands separated by idle moments (a wake-up arriving while a client has nothing pending must
// not be lost, or no later completion of that client is ever delivered, not even a timeout).

const { test } = require('node:test')
const assert = require('node:assert/strict')
const { Client } = require('..')
const { startTopology, waitFor } = require('./helpers')

const DEADLINE_MS = 3000
const SLACK_MS = 2000

/**
 * Tracks every operation: start time, and when and how it settled. `late(now)` lists those not
 * settled within deadline + slack (or settled after it), `wrong` the unexpected outcomes.
 */
function ledger(allowed = ['timeout', 'connection_lost']) {
  const ops = []
  const wrong = []
  return {
    ops,
    wrong,
    track(promise, what) {
      const op = { what, start: Date.now(), end: null, code: null }
      ops.push(op)
      return promise.then(
        (v) => {
          op.end = Date.now()
          op.code = 'ok'
          return v
        },
        (e) => {
          op.end = Date.now()
          op.code = e && e.code
          if (!allowed.includes(op.code)) wrong.push(`${what}: ${op.code}: ${e && e.message}`)
          throw e
        },
      )
    },
    pending() {
      return ops.filter((o) => o.end === null)
    },
    late(now = Date.now()) {
      return ops
        .filter((o) => (o.end ?? now) - o.start > DEADLINE_MS + SLACK_MS)
        .map((o) => `${o.what} ${o.end === null ? 'still pending' : 'settled late'} after ${(o.end ?? now) - o.start} ms (${o.code})`)
    },
  }
}

/**
 * Closes every client, waiting at most 10 s. If a close does not settle (its completion was lost,
 * like the commands this file is about), the clients stop holding the process, so the suite
 * reports the failure instead of hanging on operations that will never settle.
 */
async function closeAll(clients) {
  const closed = await Promise.race([
    Promise.all(clients.map((c) => c.close())).then(() => true),
    new Promise((r) => setTimeout(() => r(false), 10000).unref()),
  ])
  if (!closed) for (const c of clients) c._native.hold(false)
  return closed
}

async function killUnderWriters(clientCount) {
  const topo = await startTopology()
  const clients = []
  try {
    for (let i = 0; i < clientCount; i++) {
      clients.push(await Client.connect(topo.url, { commandTimeoutMs: DEADLINE_MS }))
    }
    const [first] = clients
    const book = ledger()
    const oldPort = topo.info.primary.port
    let switched = null
    first.on('primary_changed', (e) => {
      if (e.old && e.old.port === oldPort) switched = e
    })
    let stop = false
    let acked = 0
    const writer = async (n) => {
      while (!stop) {
        try {
          await book.track(first.execute(['INCR', 'deadlines:ctr']), `INCR#${n}`)
          acked++
        } catch {
          // A brief back-off, as applications do: the client has nothing pending meanwhile.
          await new Promise((r) => setTimeout(r, 10))
        }
      }
    }
    // The second client sends a PING every 500 ms; the others stay idle.
    const pinger = setInterval(() => {
      if (clients[1]) book.track(clients[1].execute(['PING']), 'PING').catch(() => {})
    }, 500)
    const writers = Array.from({ length: 16 }, (_, n) => writer(n))
    try {
      await waitFor(() => acked > 200, 15000, 'writes before the kill')
      const killSentAt = Date.now()
      assert.equal((await topo.cmd(`kill9 ${oldPort}`)).ok, true)
      // Commands in flight when the kill was sent (their outcome depends on when it landed).
      const inFlight = book.ops.filter((o) => o.start <= killSentAt && (o.end === null || o.end >= killSentAt)).length
      await waitFor(() => switched, 40000, 'primary_changed away from the killed primary')
      // Writes succeed again, or the commands that would have to stop settling do show up below.
      const ackedAtSwitch = acked
      await waitFor(() => acked > ackedAtSwitch + 100 || book.late().length > 0, 40000, 'writes after the switch')
      stop = true
      // Wait for the state "nothing pending", bounded by the last deadline plus the slack.
      const lastStart = Math.max(...book.ops.map((o) => o.start))
      await waitFor(
        () => book.pending().length === 0 || Date.now() > lastStart + DEADLINE_MS + SLACK_MS,
        DEADLINE_MS + SLACK_MS + 5000,
        'every operation settled or past its deadline',
      )
      const late = book.late()
      assert.deepEqual(
        late.slice(0, 20),
        [],
        `${clientCount} clients, ${inFlight} commands in flight at the kill: ${late.length} not settled by deadline + slack`,
      )
      assert.deepEqual(book.wrong, [])
      assert.ok(inFlight > 0, 'commands were in flight when the kill was sent')
      assert.ok(acked > ackedAtSwitch, 'writes succeeded after the switch')
    } finally {
      stop = true
      clearInterval(pinger)
      // Writers end once their last command settles (each by its deadline, asserted above).
      await Promise.race([Promise.all(writers), new Promise((r) => setTimeout(r, DEADLINE_MS + SLACK_MS))])
    }
  } finally {
    await closeAll(clients)
    await topo.down()
  }
}

test('kill -9 under 16 writers on the first of 2 clients: every command settles by its deadline', async () => {
  await killUnderWriters(2)
})

test('kill -9 under 16 writers on the first of 8 clients: every command settles by its deadline', async () => {
  await killUnderWriters(8)
})

test('bursts separated by idle moments on 2 clients: no completion waits for a lost wake-up', async () => {
  const topo = await startTopology()
  const clients = []
  try {
    for (let i = 0; i < 2; i++) clients.push(await Client.connect(topo.url, { commandTimeoutMs: DEADLINE_MS }))
    const book = ledger([])
    // Each round: 16 commands at once on each client (their completions race with the drains
    // that deliver them, which schedules wake-ups for results already delivered), then a moment
    // with nothing pending, when such a wake-up arrives. A wake-up lost there leaves every later
    // completion of the client undelivered: the next round never settles.
    let rounds = 0
    let stuck = false
    while (rounds < 3000 && !stuck) {
      const round = Promise.all(
        clients.flatMap((c, i) =>
          Array.from({ length: 16 }, (_, n) => book.track(c.execute(['PING']), `round ${rounds} client ${i} PING#${n}`)),
        ),
      )
      const deadline = new Promise((r) => {
        const t = setTimeout(() => r('late'), DEADLINE_MS + SLACK_MS)
        round.finally(() => clearTimeout(t)).catch(() => {})
      })
      stuck = (await Promise.race([round.then(() => 'ok'), deadline])) === 'late'
      rounds++
      await new Promise((r) => (rounds % 2 ? setImmediate(r) : setTimeout(r, 1)))
    }
    const late = book.late()
    assert.deepEqual(late.slice(0, 10), [], `${late.length} commands not settled by deadline + slack after ${rounds} rounds`)
    assert.deepEqual(book.wrong, [])
  } finally {
    await closeAll(clients)
    await topo.down()
  }
})
