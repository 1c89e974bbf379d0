using System;
using System.Collections.Generic;
using System.Runtime.InteropServices;

namespace SentinelRecovery
{
    /// <summary>Commands encoded and pinned for the duration of one native call (the library copies them).</summary>
    internal sealed unsafe class PinnedCommands : IDisposable
    {
        private readonly List<GCHandle> _pins = new List<GCHandle>();
        internal readonly Native.sr_command_t[] Commands;

        internal PinnedCommands(IList<object[]> commands)
        {
            Commands = new Native.sr_command_t[commands.Count];
            try
            {
                for (int i = 0; i < commands.Count; i++)
                {
                    byte[] buf;
                    int[] lens;
                    SentinelClient.EncodeArgs(commands[i], out buf, out lens);
                    var argv = new IntPtr[lens.Length];
                    var argvLen = new UIntPtr[lens.Length];
                    var b = Pin(buf);
                    int pos = 0;
                    for (int j = 0; j < lens.Length; j++)
                    {
                        argv[j] = b + pos;
                        argvLen[j] = (UIntPtr)(uint)lens[j];
                        pos += lens[j];
                    }
                    Commands[i].argc = (UIntPtr)(uint)lens.Length;
                    Commands[i].argv = (IntPtr*)Pin(argv);
                    Commands[i].argv_len = (UIntPtr*)Pin(argvLen);
                }
            }
            catch
            {
                Dispose();
                throw;
            }
        }

        private IntPtr Pin(object array)
        {
            var h = GCHandle.Alloc(array, GCHandleType.Pinned);
            _pins.Add(h);
            return h.AddrOfPinnedObject();
        }

        public void Dispose()
        {
            foreach (var h in _pins) h.Free();
            _pins.Clear();
        }
    }
}
