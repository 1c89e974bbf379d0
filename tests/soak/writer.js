// The soak's Node writer (see tests/src/bin/sr-soak/writer.rs for the loop and log format).
// Usage: node writer.js URL ID LOG STOPFILE READS(0|1); env SR_NODE_BINDING overrides where the
// binding is loaded from (default: the repository's bindings-node).
'use strict'
const fs = require('node:fs')
const path = require('node:path')
const { Client, SentinelRecoveryError } = require(
  process.env.SR_NODE_BINDING || path.join(__dirname, '..', '..', 'bindings-node'))

const ROUND_PAUSE_MS = 20

async function main ([url, id, logPath, stop, reads]) {
  const client = Client.open(url)
  const log = fs.openSync(logPath, 'w')
  const list = `soak:l:${id}`
  const counter = `soak:c:${id}`
  async function call (op, v, args) {
    const t0 = Date.now()
    let ok = true; let reply = null; let err = null
    try {
      const r = await client.execute(args)
      reply = Buffer.isBuffer(r) ? r.toString() : (typeof r === 'bigint' ? Number(r) : r)
    } catch (e) {
      if (!(e instanceof SentinelRecoveryError)) throw e
      ok = false; err = `${e.code}: ${e.message}`
    }
    const t1 = Date.now()
    fs.writeSync(log, JSON.stringify({ w: id, op, v, t0, t1, ok, reply, err }) + '\n')
  }
  let seq = 0
  while (!fs.existsSync(stop)) {
    seq += 1
    // Both in flight at once: the INCR joins the RPUSH's reply on this thread's loop (the
    // binding reads the replies of the commands it keeps in flight itself), so the faults meet
    // that path too. The list keeps its order: one RPUSH per round.
    await Promise.all([
      call('rpush', seq, ['RPUSH', list, String(seq)]),
      call('incr', null, ['INCR', counter]),
    ])
    if (reads === '1') await call('get', null, ['GET', counter])
    await new Promise((resolve) => setTimeout(resolve, ROUND_PAUSE_MS))
  }
  await client.close()
  fs.closeSync(log)
}

if (process.argv.length !== 7) {
  console.error('usage: node writer.js URL ID LOG STOPFILE READS(0|1)')
  process.exit(2)
}
main(process.argv.slice(2)).catch((e) => { console.error(e); process.exit(1) })
