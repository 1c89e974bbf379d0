'use strict'
// Shared by the Node benchmarks: topology control through the testkit's sr-topology and stats.
const path = require('node:path')
const helpers = require('../../bindings-node/test/helpers')

// SR_ADDON_DIR: another build of the package (index.js, native.js and the .node file), for A/B
// runs against the in-tree one.
const sr = require(process.env.SR_ADDON_DIR ? path.resolve(process.env.SR_ADDON_DIR) : '../../bindings-node')

function percentile(sorted, p) {
  if (sorted.length === 0) return NaN
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]
}

function sentinelsOf(info) {
  return info.sentinels.map((s) => ({ host: s.host, port: s.port }))
}

module.exports = { ...helpers, sr, percentile, sentinelsOf, path }
