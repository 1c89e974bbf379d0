using System;
using System.Collections.Generic;
using System.Linq;
using System.Threading;
using System.Threading.Tasks;

namespace SentinelRecovery
{
    /// <summary>
    /// A transaction begun with <see cref="SentinelClient.BeginTransactionAsync"/>, on a dedicated
    /// connection to the primary it began on: <see cref="WatchAsync"/>, reads with
    /// <see cref="ExecuteAsync"/>, then <see cref="ExecAsync"/>, which ends it. Dispose it when
    /// done (that discards it unless EXEC ran). <see cref="ExecAsync"/> faults with
    /// <see cref="ConnectionLostException"/> ("nothing was applied") when the primary changed since
    /// the transaction began: begin again on the new primary. Steps run in the order started.
    /// </summary>
    public sealed class SentinelTransaction : IDisposable
    {
        private IntPtr _tx;
        private readonly SentinelClient _client;

        internal SentinelTransaction(IntPtr tx, SentinelClient client)
        {
            _tx = tx;
            _client = client;
        }

        /// <summary><c>WATCH keys...</c>: <see cref="ExecAsync"/> then completes with null if any of them changed.</summary>
        public unsafe Task WatchAsync(params object[] keys)
        {
            IntPtr tx = Handle();
            using (var pinned = new PinnedCommands(new[] { keys }))
            {
                var c = pinned.Commands[0];
                return _client.StartInto(SentinelClient.CopyReply, CancellationToken.None, (mailbox, id, op) =>
                    Native.sr_transaction_watch_into(tx, c.argc, c.argv, c.argv_len, mailbox, id));
            }
        }

        /// <summary>Runs one command now on the transaction's connection (a read between WATCH and EXEC).</summary>
        public unsafe Task<RedisReply> ExecuteAsync(params object[] args)
        {
            IntPtr tx = Handle();
            using (var pinned = new PinnedCommands(new[] { args }))
            {
                var c = pinned.Commands[0];
                return _client.StartInto(SentinelClient.CopyReply, CancellationToken.None, (mailbox, id, op) =>
                    Native.sr_transaction_execute_into(tx, c.argc, c.argv, c.argv_len, mailbox, id));
            }
        }

        /// <summary>
        /// MULTI, <paramref name="commands"/>, EXEC: one reply per command (a command failing
        /// inside EXEC is a reply of type <see cref="ReplyType.Error"/>), or null when a watched
        /// key changed (nothing ran). Ends the transaction.
        /// </summary>
        public unsafe Task<RedisReply[]> ExecAsync(IEnumerable<object[]> commands)
        {
            if (commands == null) throw new ArgumentNullException("commands");
            IntPtr tx = Handle();
            using (var pinned = new PinnedCommands(commands.ToList()))
            {
                var cmds = pinned.Commands;
                return _client.StartInto(SentinelClient.CopyExec, CancellationToken.None, (mailbox, id, op) =>
                {
                    fixed (Native.sr_command_t* pc = cmds)
                        return Native.sr_transaction_exec_into(tx, pc, (UIntPtr)(uint)cmds.Length, mailbox, id);
                });
            }
        }

        /// <summary>Ends the transaction without running anything (unless EXEC already ran). Idempotent.</summary>
        public void Dispose()
        {
            IntPtr tx = Interlocked.Exchange(ref _tx, IntPtr.Zero);
            if (tx != IntPtr.Zero) Native.sr_transaction_free(tx);
        }

        private IntPtr Handle()
        {
            IntPtr tx = Volatile.Read(ref _tx);
            if (tx == IntPtr.Zero) throw new ObjectDisposedException("SentinelTransaction");
            return tx;
        }
    }
}
