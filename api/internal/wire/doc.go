// Package wire is the API's JSON on the wire, written by hand where
// encoding/json's reflection would be most of the HTTP path's cost or is
// too lax for the OpenAPI document:
//
//   - Decoding a request body strictly ([Strict], [Raw]): one JSON value,
//     no unknown member, member names matched exactly (encoding/json folds
//     case), every failure an [*Error] naming the member at fault.
//   - Encoding the Job resource ([AppendJob], [AppendJobs]) and its parts
//     ([AppendString], [AppendTime], ...), byte for byte what encoding/json
//     would write, which the tests and fuzz targets hold it to.
//   - The API's forms of times and durations ([Time], [Duration],
//     [TimeLayout]).
//
// It knows nothing of HTTP routes or status codes: package api maps an
// [*Error] to its 400 or 413 answer.
package wire
