// The calls that send commands: a deadline of their own (with native cancellation),
// pipelines, one-shot transactions, and how their outcomes are read. They complete on the core
// thread that has the reply (PendingCalls.cs, StartWithCallback); the interactive transaction
// (BeginTransactionAsync, Transaction.cs) and the test hook complete through the host mailbox.
using System;
using System.Collections.Generic;
using System.Linq;
using System.Threading;
using System.Threading.Tasks;

namespace SentinelRecovery
{
    /// <summary>One command's result in a pipeline: its reply, or its own error (not thrown).</summary>
    public sealed class CommandResult
    {
        internal CommandResult(RedisReply reply, SentinelRecoveryException error)
        {
            Reply = reply;
            Error = error;
        }

        /// <summary>The reply; null when the command failed.</summary>
        public RedisReply Reply { get; }

        /// <summary>The command's error (e.g. a <see cref="ServerException"/> for WRONGTYPE); null on success.</summary>
        public SentinelRecoveryException Error { get; }

        /// <summary>Whether the command failed.</summary>
        public bool IsError { get { return Error != null; } }
    }

    public sealed partial class SentinelClient
    {
        /// <summary>
        /// Sends one command with a deadline of its own instead of the client's
        /// <c>command_timeout_ms</c>; past it the task faults with
        /// <see cref="SentinelTimeoutException"/>. It ends blocking commands too (BLPOP k 0 included:
        /// their connection is closed, so the server stops blocking them).
        /// </summary>
        /// <exception cref="ConfigException"><paramref name="timeout"/> is not more than zero and at
        /// most 2147483647 ms (the rule every binding shares).</exception>
        public Task<RedisReply> ExecuteAsync(TimeSpan timeout, params object[] args)
        {
            return ExecuteAsync(timeout, CancellationToken.None, args);
        }

        /// <summary>
        /// As <see cref="ExecuteAsync(TimeSpan, object[])"/>, cancellable: cancelling the token
        /// cancels the task at once and the command in the library. A command already sent may
        /// still have run on the server; it is never retried.
        /// </summary>
        public Task<RedisReply> ExecuteAsync(TimeSpan timeout, CancellationToken cancellationToken, params object[] args)
        {
            return ExecuteWith(TimeoutMs(timeout), cancellationToken, args);
        }

        /// <summary>One command with a deadline in ms (0: the client's) and native cancellation.</summary>
        private unsafe Task<RedisReply> ExecuteWith(ulong ms, CancellationToken cancellationToken, object[] args)
        {
            using (var pinned = new PinnedCommands(new[] { args }))
            {
                var c = pinned.Commands[0];
                return StartWithCallback(ReadReply, cancellationToken, (callback, userData, op) =>
                {
                    var o = new Native.sr_call_options_t { timeout_ms = ms, operation = op };
                    return Native.sr_client_execute_with(_handle, c.argc, c.argv, c.argv_len, &o, callback, userData);
                });
            }
        }

        /// <summary>For the test suite only: an operation whose work panics on a core thread;
        /// the task fails with <see cref="InternalException"/>, once, and the client goes on.</summary>
        internal unsafe Task<RedisReply> PanicForTestAsync()
        {
            return StartInto(CopyReply, CancellationToken.None,
                (mailbox, id, op) => Native.sr_client_panic_for_test_into(_handle, mailbox, id));
        }

        /// <summary>
        /// Sends <paramref name="commands"/> (each: name, then its arguments, as for
        /// <see cref="ExecuteAsync(object[])"/>) back to back on one connection and completes
        /// with one <see cref="CommandResult"/> per command, in order: its reply or its own error.
        /// Not atomic (see <see cref="TransactionAsync"/>). Faults only when the pipeline failed
        /// as a whole: no primary by the deadline, or a command a pipeline can't carry (BLPOP,
        /// MULTI, ...: <see cref="ConfigException"/>, nothing sent). <paramref name="timeout"/> is
        /// the whole pipeline's deadline (null: <c>command_timeout_ms</c>); cancelling the token
        /// cancels it (commands already sent may have run; nothing is retried).
        /// </summary>
        public unsafe Task<CommandResult[]> PipelineAsync(IEnumerable<object[]> commands, TimeSpan? timeout = null,
            CancellationToken cancellationToken = default(CancellationToken))
        {
            if (commands == null) throw new ArgumentNullException("commands");
            ulong ms = timeout.HasValue ? TimeoutMs(timeout.Value) : 0;
            using (var pinned = new PinnedCommands(commands.ToList()))
            {
                var cmds = pinned.Commands;
                return StartWithCallback(Results, cancellationToken, (callback, userData, op) =>
                {
                    var o = new Native.sr_call_options_t { timeout_ms = ms, operation = op };
                    fixed (Native.sr_command_t* pc = cmds)
                        return Native.sr_client_pipeline(_handle, pc, (UIntPtr)(uint)cmds.Length, &o, callback, userData);
                });
            }
        }

        /// <summary>
        /// Runs <paramref name="commands"/> atomically (MULTI ... EXEC) on a dedicated connection to
        /// the primary, after <c>WATCH</c> of <paramref name="watch"/> when given. Completes with
        /// one reply per command (a command failing inside EXEC is a reply of type
        /// <see cref="ReplyType.Error"/>), or null when a watched key changed (nothing ran).
        /// Faults with <see cref="ConnectionLostException"/> ("nothing was applied") when the
        /// primary changed meanwhile. To read watched keys before EXEC use
        /// <see cref="BeginTransactionAsync"/>. <paramref name="timeout"/> (null:
        /// <c>command_timeout_ms</c>) bounds the whole transaction, from this call until EXEC's
        /// reply; past it the task faults with <see cref="SentinelTimeoutException"/> and the
        /// transaction's connection is closed (an EXEC sent but not answered in time may or may not
        /// have been applied). Cancelling the token cancels all of it. A command that can't run in
        /// a transaction (blocking commands, MULTI, ...) faults with <see cref="ConfigException"/>
        /// before anything is sent.
        /// </summary>
        /// <exception cref="ConfigException"><paramref name="timeout"/> is not more than zero and at
        /// most 2147483647 ms.</exception>
        public unsafe Task<RedisReply[]> TransactionAsync(IEnumerable<object[]> commands, object[] watch = null,
            TimeSpan? timeout = null, CancellationToken cancellationToken = default(CancellationToken))
        {
            if (commands == null) throw new ArgumentNullException("commands");
            ulong ms = timeout.HasValue ? TimeoutMs(timeout.Value) : 0;
            var all = commands.ToList();
            int n = all.Count;
            bool watching = watch != null && watch.Length > 0;
            if (watching) all.Add(watch);
            using (var pinned = new PinnedCommands(all))
            {
                var cmds = pinned.Commands;
                return StartWithCallback(ExecReplies, cancellationToken, (callback, userData, op) =>
                {
                    var o = new Native.sr_call_options_t { timeout_ms = ms, operation = op };
                    var keys = watching ? cmds[n] : default(Native.sr_command_t);
                    fixed (Native.sr_command_t* pc = cmds)
                        return Native.sr_client_transaction(_handle, pc, (UIntPtr)(uint)n, keys.argc, keys.argv,
                            keys.argv_len, &o, callback, userData);
                });
            }
        }

        /// <summary>
        /// Begins a transaction on a dedicated connection to the current primary (waiting for one
        /// like a command). Dispose it when done: that discards it unless
        /// <see cref="SentinelTransaction.ExecAsync"/> ran. <paramref name="timeout"/>, when given,
        /// bounds the whole transaction, from this call until EXEC completes: each step only has
        /// the time left, and one past it faults with <see cref="SentinelTimeoutException"/> and
        /// ends the transaction (its connection is closed; an EXEC sent but not answered in time may
        /// or may not have been applied). Null: the begin and each step get
        /// <c>command_timeout_ms</c> of their own.
        /// </summary>
        /// <exception cref="ConfigException"><paramref name="timeout"/> is not more than zero and at
        /// most 2147483647 ms.</exception>
        public unsafe Task<SentinelTransaction> BeginTransactionAsync(TimeSpan? timeout = null,
            CancellationToken cancellationToken = default(CancellationToken))
        {
            ulong ms = timeout.HasValue ? TimeoutMs(timeout.Value) : 0;
            return StartInto(d => new SentinelTransaction(Native.Delivery(d).transaction, this), cancellationToken,
                (mailbox, id, op) =>
                {
                    var o = new Native.sr_call_options_t { timeout_ms = ms, operation = op };
                    return Native.sr_client_transaction_begin_into(_handle, &o, mailbox, id);
                });
        }

        internal static void EncodeArgs(object[] args, out byte[] buf, out int[] lens)
        {
            Encode(args, out buf, out lens);
        }

        /// <summary>A call's own timeout under the rule every binding shares (the core's, through
        /// sr_call_timeout_ms): more than zero and at most 2147483647 ms, else <see cref="ConfigException"/>
        /// naming the value, nothing sent.</summary>
        private static ulong TimeoutMs(TimeSpan timeout)
        {
            ulong ms;
            IntPtr error;
            int rc = Native.sr_call_timeout_ms(timeout.TotalMilliseconds, out ms, out error);
            if (rc != Native.SR_OK) throw SentinelRecoveryException.TakeNative(rc, error);
            return ms;
        }

        /// <summary>The reply of a call that completes into the mailbox (<c>sr_delivery_t*</c>).</summary>
        internal static RedisReply CopyReply(IntPtr delivery) { return RedisReply.Copy(Native.Delivery(delivery).reply); }

        private static RedisReply ReadReply(IntPtr reply) { return RedisReply.Copy(reply); }

        /// <summary>One result per command (<c>sr_results_t*</c>).</summary>
        private static CommandResult[] Results(IntPtr results)
        {
            int n = (int)(uint)Native.sr_results_len(results);
            var out_ = new CommandResult[n];
            for (int i = 0; i < n; i++)
            {
                IntPtr e = Native.sr_results_error(results, (UIntPtr)(uint)i);
                out_[i] = e != IntPtr.Zero
                    ? new CommandResult(null, SentinelRecoveryException.FromNative(e))
                    : new CommandResult(RedisReply.Copy(Native.sr_results_reply(results, (UIntPtr)(uint)i)), null);
            }
            return out_;
        }

        /// <summary>EXEC's replies (<c>sr_results_t*</c>); null when a watched key changed (the
        /// library passes no results and no error).</summary>
        private static RedisReply[] ExecReplies(IntPtr results)
        {
            if (results == IntPtr.Zero) return null;
            return Results(results).Select(r => r.Reply).ToArray();
        }

        /// <summary>EXEC's replies of a call that completes into the mailbox (<c>sr_delivery_t*</c>).</summary>
        internal static RedisReply[] CopyExec(IntPtr delivery) { return ExecReplies(Native.Delivery(delivery).results); }
    }
}
