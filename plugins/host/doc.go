// Package host turns plugin specs into codecs, partitioners and flush
// policies, whether they are built in or external, and owns the plugin
// processes it starts.
//
// # Resolving a spec
//
// A spec is "name" or "name:key=value,...". For a kind (codec, partitioner,
// flushpolicy) the name resolves, in order, to:
//
//  1. an external plugin at that path, when the name contains '/'
//     ("./bin/plugins/weir-codec-s2:level=better");
//  2. the built-in registered under that name ("zstd:level=3");
//  3. the plugin binary weir-<kind>-<name> in Config.Dir ("s2:level=better"
//     finds DIR/weir-codec-s2).
//
// Otherwise the error wraps the kind's unknown-name sentinel
// (codec.ErrUnknownCodec, ...) and says where it looked. Built-ins win over
// the directory so a stray file cannot replace one.
//
// # Processes
//
// The host starts one process per plugin binary (by absolute path) the first
// time a spec needs it, and every instance from that binary shares it: one
// flush policy per partition, one partitioner per producer, all in one
// process, each with its own instance id. The process is supervised (package
// pluginrpc): per-call deadlines, restarts within a budget, clear errors that
// wrap the kind's ErrPluginFailed and name the plugin. Close kills them all;
// so does the kernel if the host dies (Pdeathsig), and the plugins watch
// their parent as well.
package host
