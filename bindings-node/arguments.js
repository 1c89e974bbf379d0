'use strict'
/**
 * Command arguments checked and converted as every binding writes them: strings (well-formed
 * UTF-16 only), Buffers/Uint8Arrays, and numbers or bigints as text.
 */

const { makeError, isPackageError } = require('./errors_by_code.js')

/** Whether `s` is well-formed UTF-16 (no lone surrogate), so it has an exact UTF-8 form. */
const isWellFormed =
  typeof String.prototype.isWellFormed === 'function'
    ? (s) => s.isWellFormed()
    : (s) => !/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/.test(s)

/**
 * A number argument as every binding writes it (NaN is refused before this): bigints and
 * integral numbers below 1e21 in decimal, +/-Infinity as `inf` / `-inf` (as Redis writes them),
 * other numbers as their shortest round-trip text, `-0` with its sign.
 */
function numberText(n) {
  if (typeof n === 'bigint') return n.toString()
  if (n === Infinity) return 'inf'
  if (n === -Infinity) return '-inf'
  if (Object.is(n, -0)) return '-0'
  return String(n)
}

/** Checks and converts one command's arguments; a copy when numbers were converted, or an Error. */
function checkArgs(args, what) {
  if (!Array.isArray(args) || args.length === 0) {
    return new TypeError(`${what} expects a non-empty array of arguments`)
  }
  let copied = false
  for (let i = 0; i < args.length; i++) {
    const a = args[i]
    if (typeof a === 'string') {
      if (!isWellFormed(a)) {
        return makeError('config', `argument ${i} is not valid Unicode: lone surrogate`, null)
      }
    } else if (!(a instanceof Uint8Array)) {
      if (typeof a === 'number' || typeof a === 'bigint') {
        if (typeof a === 'number' && Number.isNaN(a)) {
          return makeError('config', `argument ${i} is NaN`, null)
        }
        if (!copied) {
          args = args.slice()
          copied = true
        }
        args[i] = numberText(a)
      } else {
        return new TypeError(`argument ${i} must be a string, Buffer or number`)
      }
    }
  }
  return args
}

/** Checks every command of a pipeline or transaction; the converted commands, or an Error. */
function checkCommands(commands, what) {
  if (!Array.isArray(commands)) return new TypeError(`${what} expects an array of commands`)
  const out = []
  for (let i = 0; i < commands.length; i++) {
    const c = checkArgs(commands[i], `${what} command ${i}`)
    if (c instanceof Error) {
      if (isPackageError(c)) c.message = `command ${i}: ${c.message}`
      return c
    }
    out.push(c)
  }
  return out
}

module.exports = { checkArgs, checkCommands }
