'use strict'
// Failover recovery: 16 concurrent writers (INCR, each awaiting its reply before the next; 10 ms
// pause after an error, as an application's retry would), kill -9 of the current primary, ROUNDS
// rounds per client kind, one fresh topology per kind (3 sentinels, quorum 2, 2 replicas). Per
// round:
//   lag   from the first +switch-master publication (this script subscribes to all three
//         sentinels with its own RESP client, resp.js) to the first successful write from the new
//         primary (a write completed more than 500 ms after the kill: down-after is 1000 ms, so
//         nothing earlier can come from a new primary); negative when the client wrote to the
//         promoted replica before the switch was published;
//   gap   from the last successful write before the kill to that first write;
//   errors the promise rejections the writers saw during the round, by code (or message);
//   sentinel commands: sum over the sentinels of INFO stats total_commands_processed, read just
//         before the kill and at the end of the window (2 s after +switch-master, or 200 ms after
//         the first write if later); the same is measured with no client at all (kind `none`),
//         and "beyond baseline" is raw - baseline rate x window length.
// After each round the killed node is restarted and the script waits until all sentinels report
// the same primary, it has 2 online replicas, every sentinel sees both replicas healthy, and
// 6.5 s have passed since the switch (sentinels refuse a new failover of the same master within
// 2 x failover-timeout).
//
// Usage: node recovery.js [ROUNDS=10] [KINDS=none,sentinel-recovery,ioredis,ioredis-fd,node-redis]
const fs = require('node:fs')
const { startTopology, sr, percentile, sentinelsOf } = require('./common')
const resp = require('./resp')
const Redis = require('ioredis')
const { createSentinel } = require('redis')

const ROUNDS = Number(process.argv[2] || 10)
const KINDS = (process.argv[3] || 'none,sentinel-recovery,ioredis,ioredis-fd,node-redis').split(',')
const WRITERS = 16
const NEW_PRIMARY_AFTER_MS = 500
const WINDOW_AFTER_SWITCH_MS = 2000

const sleep = (ms) => new Promise((r) => setTimeout(r, ms))
const loadavg = () => fs.readFileSync('/proc/loadavg', 'utf8').trim()
const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b)
  if (s.length === 0) return null
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2
}

async function openClient(kind, topo) {
  const { info } = topo
  if (kind === 'none') return { op: null, close: async () => {} }
  if (kind === 'sentinel-recovery') {
    const c = await sr.Client.connect(info.url, { commandTimeoutMs: 5000 })
    return { op: () => c.execute(['INCR', 'bench:recovery']), close: () => c.close() }
  }
  if (kind === 'ioredis' || kind === 'ioredis-fd') {
    const c = new Redis({ sentinels: sentinelsOf(info), name: info.service, failoverDetector: kind === 'ioredis-fd' })
    c.on('error', () => {})
    await c.ping()
    return { op: () => c.incr('bench:recovery'), close: async () => c.disconnect() }
  }
  if (kind === 'node-redis') {
    const c = await createSentinel({ name: info.service, sentinelRootNodes: sentinelsOf(info) })
      .on('error', () => {})
      .connect()
    return { op: () => c.incr('bench:recovery'), close: () => c.close() }
  }
  throw new Error(`unknown kind ${kind}`)
}

async function runKind(kind) {
  const topo = await startTopology(['--sentinels', '3', '--quorum', '2', '--replicas', '2'])
  const conns = []
  let client = null
  let stop = false
  const writers = []
  try {
    const service = topo.info.service
    const sentinelPorts = topo.info.sentinels.map((s) => s.port)
    const infoConns = await Promise.all(sentinelPorts.map((p) => resp.connect(p)))
    conns.push(...infoConns)
    let switchAt = null
    let switchMsg = null
    for (const p of sentinelPorts) {
      const sub = await resp.connect(p)
      conns.push(sub)
      sub.onPush((m, at) => {
        if (m[1] === '+switch-master' && switchAt === null) {
          switchAt = at
          switchMsg = m[2]
        }
      })
      await sub.command(['SUBSCRIBE', '+switch-master'])
    }
    const sentinelCalls = async () => {
      let total = 0
      for (const c of infoConns) total += Number(resp.infoFields(await c.command(['INFO', 'stats'])).total_commands_processed)
      return total
    }

    client = await openClient(kind, topo)
    // writer state, shared by all rounds
    let lastOk = null // completion time of the most recent success
    let killAt = null // set per round
    let firstNew = null // first success from the new primary this round
    let lastOkBefore = null // last success before it
    let okThisRound = 0
    let errs = {}
    const writer = async () => {
      while (!stop) {
        try {
          await client.op()
          const t = performance.now()
          okThisRound++
          if (killAt !== null && firstNew === null && t - killAt > NEW_PRIMARY_AFTER_MS) {
            firstNew = t
            lastOkBefore = lastOk
          }
          lastOk = t
        } catch (e) {
          const k = e.code || String(e.message).replace(/[0-9.:]+/g, '').slice(0, 50)
          errs[k] = (errs[k] || 0) + 1
          await sleep(10)
        }
      }
    }
    if (client.op) for (let i = 0; i < WRITERS; i++) writers.push(writer())
    await sleep(1000)

    const rows = []
    for (let round = 1; round <= ROUNDS; round++) {
      const before = await topo.cmd('primary')
      const oldPort = before.port
      switchAt = null
      switchMsg = null
      firstNew = null
      errs = {}
      okThisRound = 0
      const callsBefore = await sentinelCalls()
      const windowStart = performance.now()
      await topo.cmd(`kill9 ${oldPort}`)
      killAt = performance.now()
      lastOkBefore = null
      const deadline = killAt + 30000
      while (switchAt === null && performance.now() < deadline) await sleep(2)
      if (client.op) while ((firstNew === null || switchAt === null) && performance.now() < deadline) await sleep(1)
      const windowEnd = Math.max((switchAt ?? performance.now()) + WINDOW_AFTER_SWITCH_MS, (firstNew ?? 0) + 200)
      await sleep(Math.max(0, windowEnd - performance.now()))
      const callsAfter = await sentinelCalls()
      const windowMs = performance.now() - windowStart
      const row = {
        kind,
        round,
        old_primary: oldPort,
        switch: switchMsg,
        kill_to_switch_ms: switchAt !== null ? switchAt - killAt : null,
        lag_ms: firstNew !== null && switchAt !== null ? firstNew - switchAt : null,
        gap_ms: firstNew !== null && lastOkBefore !== null ? firstNew - lastOkBefore : null,
        errors: errs,
        error_count: Object.values(errs).reduce((a, b) => a + b, 0),
        // our own INFO on each sentinel at the start is counted once (Redis counts a command
        // after it runs, so the first read's own INFO lands in the difference)
        sentinel_cmds: callsAfter - callsBefore - sentinelPorts.length,
        window_ms: windowMs,
        ok_in_window: okThisRound,
      }
      killAt = null
      // restart the killed node and wait for a steady topology for the next round
      await topo.cmd(`restart ${oldPort}`)
      const newPort = switchMsg ? Number(switchMsg.split(' ')[4]) : null
      await steady(topo, infoConns, service, oldPort, newPort, (switchAt ?? performance.now()) + 6500)
      row.loadavg = loadavg()
      console.log(JSON.stringify(row))
      rows.push(row)
      await sleep(500)
    }
    return rows
  } finally {
    stop = true
    await Promise.race([Promise.all(writers), sleep(10000)])
    if (client) await client.close().catch(() => {})
    for (const c of conns) c.close()
    await topo.down()
  }
}

/** Waits (up to 60 s) until the topology is steady after a round; throws if it does not get there. */
async function steady(topo, infoConns, service, oldPort, newPort, notBefore) {
  const end = performance.now() + 60000
  let why = ''
  for (;;) {
    why = await (async () => {
      const addrs = await Promise.all(infoConns.map((c) => c.command(['SENTINEL', 'GET-MASTER-ADDR-BY-NAME', service])))
      const ports = new Set(addrs.map((a) => a && a[1]))
      if (ports.size !== 1) return `sentinels disagree: ${[...ports]}`
      const port = Number([...ports][0])
      if (port === oldPort) return 'still the old primary'
      if (newPort !== null && port !== newPort) return `primary ${port} is not the switched-to ${newPort}`
      const p = await resp.connect(port)
      try {
        const f = resp.infoFields(await p.command(['INFO', 'replication']))
        if (f.role !== 'master') return `primary ${port} role ${f.role}`
        const online = Object.keys(f).filter((k) => /^slave\d+$/.test(k) && /state=online/.test(f[k])).length
        if (online !== 2) return `primary ${port} has ${online} online replicas`
      } finally {
        p.close()
      }
      for (const c of infoConns) {
        const reps = await c.command(['SENTINEL', 'REPLICAS', service])
        const healthy = reps.filter((r) => {
          const m = {}
          for (let i = 0; i + 1 < r.length; i += 2) m[r[i]] = r[i + 1]
          return m.flags === 'slave' && m['master-link-status'] === 'ok' && Number(m['master-port']) === port
        })
        if (healthy.length !== 2) return `a sentinel sees ${healthy.length} healthy replicas`
      }
      if (performance.now() < notBefore) return 'failover-timeout guard'
      return ''
    })().catch((e) => `error: ${e.message}`)
    if (why === '') return
    if (performance.now() > end) throw new Error(`topology not steady after 60 s: ${why}`)
    await sleep(100)
  }
}

;(async () => {
  console.log(`# node ${process.version}; rounds=${ROUNDS} kinds=${KINDS}; loadavg before: ${loadavg()}`)
  const all = {}
  for (const kind of KINDS) {
    try {
      all[kind] = await runKind(kind)
    } catch (e) {
      console.log(`# ${kind}: failed: ${e.stack || e}`)
      all[kind] = null
    }
  }
  console.log(`# loadavg after: ${loadavg()}`)
  const base = all.none
  const baseRate = base && base.length ? base.reduce((a, r) => a + r.sentinel_cmds, 0) / base.reduce((a, r) => a + r.window_ms, 0) : null
  if (baseRate !== null) {
    console.log(`# no-client baseline: ${(baseRate * 1000).toFixed(1)} sentinel commands/s (3 sentinels), median ${median(base.map((r) => r.sentinel_cmds))} per window of median ${median(base.map((r) => r.window_ms)).toFixed(0)} ms`)
  }
  const f = (v) => (v === null || v === undefined ? 'n/a' : v.toFixed(1))
  console.log('\n| client | rounds ok | lag median (ms) | lag min / max (ms) | write gap median / max (ms) | app errors median / max | sentinel cmds in window (median) | beyond baseline median / max |')
  console.log('|---|---|---|---|---|---|---|---|')
  for (const [kind, rows] of Object.entries(all)) {
    if (!rows) {
      console.log(`| ${kind} | failed (see above) | | | | | | |`)
      continue
    }
    const lags = rows.map((r) => r.lag_ms).filter((v) => v !== null)
    const gaps = rows.map((r) => r.gap_ms).filter((v) => v !== null)
    const extra = baseRate !== null ? rows.map((r) => r.sentinel_cmds - baseRate * r.window_ms) : []
    const errsN = rows.map((r) => r.error_count)
    const lagCell = kind === 'none' ? 'n/a' : f(median(lags))
    console.log(
      `| ${kind} | ${kind === 'none' ? rows.length : lags.length}/${rows.length} | ${lagCell} | ${lags.length ? f(Math.min(...lags)) + ' / ' + f(Math.max(...lags)) : 'n/a'} | ${gaps.length ? f(median(gaps)) + ' / ' + f(Math.max(...gaps)) : 'n/a'} | ${median(errsN)} / ${Math.max(...errsN)} | ${median(rows.map((r) => r.sentinel_cmds))} | ${extra.length ? f(median(extra)) + ' / ' + f(Math.max(...extra)) : 'n/a'} |`,
    )
  }
})().then(
  () => process.exit(0),
  (e) => {
    console.error(e)
    process.exit(1)
  },
)
