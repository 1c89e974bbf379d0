'use strict'
// Host responsiveness: event-loop delay while N clients in this process keep issuing a command
// every 100 ms each and discovery keeps retrying. Six sentinel endpoints: the topology's three
// real sentinels and three that accept and never answer (hung_server.js, a child process so its
// work is not on this loop). After a 2 s warm-up, two of the three real sentinels and then the
// primary are killed with kill -9: quorum 2 is unreachable, so no failover happens and discovery
// keeps failing for the whole window. Measured over the window, from just before the kills:
// perf_hooks.monitorEventLoopDelay({resolution: 1}) max and p99, and a probe timer every 50 ms
// measuring its own lateness. sentinel-recovery beside ioredis in sentinel mode (failoverDetector
// off and on), one client kind at a time, a fresh topology and hung server for each (kind, N).
//
// Usage: node loop_delay.js [SECONDS=30] [CLIENTS=1,11,64] [KINDS=sentinel-recovery,ioredis,ioredis-fd]
const { spawn } = require('node:child_process')
const fs = require('node:fs')
const path = require('node:path')
const readline = require('node:readline')
const { monitorEventLoopDelay } = require('node:perf_hooks')
const { startTopology, sr, percentile, withDeadline } = require('./common')
const Redis = require('ioredis')

const SECONDS = Number(process.argv[2] || 30)
const COUNTS = (process.argv[3] || '1,11,64').split(',').map(Number)
const KINDS = (process.argv[4] || 'sentinel-recovery,ioredis,ioredis-fd').split(',')
const TICK_MS = 100
const PROBE_MS = 50
const WARMUP_MS = 2000

const sleep = (ms) => new Promise((r) => setTimeout(r, ms))
const loadavg = () => fs.readFileSync('/proc/loadavg', 'utf8').trim()

async function startHung(n, maxSeconds) {
  const child = spawn(process.execPath, [path.join(__dirname, 'hung_server.js'), String(n), String(maxSeconds)], {
    stdio: ['pipe', 'pipe', 'inherit'],
  })
  const rl = readline.createInterface({ input: child.stdout })
  const line = await withDeadline(new Promise((r) => rl.once('line', r)), 10000, 'hung_server start')
  const exited = new Promise((r) => child.once('exit', r))
  return {
    ports: JSON.parse(line),
    pid: child.pid,
    stop: async () => {
      child.stdin.end()
      const t = setTimeout(() => child.kill('SIGKILL'), 5000)
      await exited
      clearTimeout(t)
    },
  }
}

/** Opens n clients of `kind`; resolves with [{op, close}], plus counters of what each library reported. */
async function openClients(kind, n, topo, hungPorts) {
  const service = topo.info.service
  const sentinels = [
    ...topo.info.sentinels.map((s) => ({ host: '127.0.0.1', port: s.port })),
    ...hungPorts.map((port) => ({ host: '127.0.0.1', port })),
  ]
  const libEvents = {}
  const count = (k) => (libEvents[k] = (libEvents[k] || 0) + 1)
  const clients = []
  if (kind === 'sentinel-recovery') {
    const url = 'redis+sentinel://' + sentinels.map((s) => `${s.host}:${s.port}`).join(',') + '/' + service
    for (let i = 0; i < n; i++) {
      const c = await sr.Client.connect(url, { commandTimeoutMs: 1000, sentinelTimeoutMs: 500 })
      c.on('event', (e) => count(e.kind))
      clients.push({ op: () => c.execute(['SET', 'probe:k', 'v']), close: () => c.close() })
    }
  } else {
    for (let i = 0; i < n; i++) {
      const c = new Redis({
        sentinels,
        name: service,
        sentinelCommandTimeout: 500,
        commandTimeout: 1000,
        failoverDetector: kind === 'ioredis-fd',
      })
      c.on('error', () => count('error'))
      c.on('reconnecting', () => count('reconnecting'))
      await c.ping()
      clients.push({ op: () => c.set('probe:k', 'v'), close: async () => c.disconnect() })
    }
  }
  return { clients, libEvents }
}

async function scenario(kind, n) {
  const hung = await startHung(3, SECONDS + 300)
  let topo
  let opened = null
  const timers = []
  try {
    topo = await startTopology(['--sentinels', '3', '--quorum', '2', '--replicas', '1'])
    opened = await openClients(kind, n, topo, hung.ports)
    const { clients, libEvents } = opened
    const outcome = { ok: 0, errors: {}, pending: 0 }
    let measuring = false
    const during = { ok: 0, errors: 0 }
    clients.forEach((c, i) => {
      const fire = () => {
        outcome.pending++
        c.op().then(
          () => {
            outcome.pending--
            outcome.ok++
            if (measuring) during.ok++
          },
          (e) => {
            outcome.pending--
            // sentinel-recovery: the stable code; ioredis: its message (its errors carry no code)
            const k = e.code || String(e.message).replace(/[0-9.:]+/g, '').slice(0, 40)
            outcome.errors[k] = (outcome.errors[k] || 0) + 1
            if (measuring) during.errors++
          },
        )
      }
      // staggered over the 100 ms so that not every client fires in the same tick
      timers.push(setTimeout(() => timers.push(setInterval(fire, TICK_MS)), (i * TICK_MS) / n))
    })
    await sleep(WARMUP_MS)
    const okBeforeKill = outcome.ok

    const h = monitorEventLoopDelay({ resolution: 1 })
    // a second monitor, read and reset every second: when in the window the worst delays happened
    const perSecond = monitorEventLoopDelay({ resolution: 1 })
    const timeline = []
    const lateness = []
    const t0 = performance.now()
    h.enable()
    perSecond.enable()
    const slot = setInterval(() => {
      timeline.push(+(perSecond.max / 1e6).toFixed(1))
      perSecond.reset()
    }, 1000)
    measuring = true
    let probeDone
    const probeFinished = new Promise((r) => (probeDone = r))
    let k = 0
    const probe = () => {
      const target = t0 + k * PROBE_MS
      lateness.push(performance.now() - target)
      k++
      if (k * PROBE_MS > SECONDS * 1000) return probeDone()
      setTimeout(probe, Math.max(0, t0 + k * PROBE_MS - performance.now()))
    }
    k = 1
    setTimeout(probe, PROBE_MS)
    const [s1, s2] = topo.info.sentinels.slice(1)
    await topo.cmd(`kill9 ${s1.port}`)
    await topo.cmd(`kill9 ${s2.port}`)
    await topo.cmd(`kill9 ${topo.info.primary.port}`)
    await probeFinished
    h.disable()
    perSecond.disable()
    clearInterval(slot)
    measuring = false
    for (const t of timers) clearTimeout(t), clearInterval(t)
    const settleEnd = Date.now() + 3000
    while (outcome.pending > 0 && Date.now() < settleEnd) await sleep(20)
    const stillPending = outcome.pending
    await Promise.all(clients.map((c) => c.close()))
    opened = null
    lateness.sort((a, b) => a - b)
    return {
      kind,
      clients: n,
      seconds: SECONDS,
      eld_max_ms: h.max / 1e6,
      eld_p99_ms: h.percentile(99) / 1e6,
      eld_mean_ms: h.mean / 1e6,
      probes: lateness.length,
      probe_max_ms: lateness[lateness.length - 1],
      probe_p99_ms: percentile(lateness, 99),
      ok_warmup: okBeforeKill,
      window_ok: during.ok,
      window_errors: during.errors,
      errors_by_code: outcome.errors,
      pending_3s_after: stillPending,
      lib_events: libEvents,
      max_ms_per_second: timeline,
    }
  } finally {
    for (const t of timers) clearTimeout(t), clearInterval(t)
    if (opened) await Promise.all(opened.clients.map((c) => c.close().catch(() => {})))
    if (topo) await topo.down()
    await hung.stop()
  }
}

;(async () => {
  console.log(`# node ${process.version}; seconds=${SECONDS} clients=${COUNTS} kinds=${KINDS}`)
  console.log(`# loadavg before: ${loadavg()}`)
  const rows = []
  for (const n of COUNTS) {
    for (const kind of KINDS) {
      const r = await scenario(kind, n)
      r.loadavg_after = loadavg()
      console.log(JSON.stringify(r))
      rows.push(r)
    }
  }
  console.log(`# loadavg after: ${loadavg()}`)
  const f = (v) => v.toFixed(1)
  console.log('\n| clients | client | loop delay max (ms) | loop delay p99 (ms) | probe lateness max (ms) | probe p99 (ms) | commands ok / failed in window | errors by code (whole run) | pending 3 s after |')
  console.log('|---|---|---|---|---|---|---|---|---|')
  for (const r of rows) {
    const errs = Object.entries(r.errors_by_code).map(([k, v]) => `${k} ${v}`).join(', ') || '0'
    console.log(`| ${r.clients} | ${r.kind} | ${f(r.eld_max_ms)} | ${f(r.eld_p99_ms)} | ${f(r.probe_max_ms)} | ${f(r.probe_p99_ms)} | ${r.window_ok} / ${r.window_errors} | ${errs} | ${r.pending_3s_after} |`)
  }
})().then(
  () => process.exit(0),
  (e) => {
    console.error(e)
    process.exit(1)
  },
)
