// Package store is chronoq's engine: the one place that knows the Redis
// layout and runs scripts on it.
//
// It holds the layout (layout.go: every key, record field and meta field),
// the Lua scripts (lua/*.lua) and the prelude generated for each from the
// layout, the declaration of each script (ops.go: its keys, its arguments
// as a params struct, its reply as a reply struct), and the one runner
// (Store.Run: EVALSHA with EVAL fallback, retries while a slot migrates,
// errors wrapped). Go fills a script's arguments by their declared names
// and reads its reply through its declaration, so Go and Lua cannot drift
// apart in silence: a reply that does not fit is a ReplyError naming the
// script and the element.
//
// It is internal because its API follows the layout: it changes whenever
// the stored format or a script does. Package queue is the public API
// over it.
package store
