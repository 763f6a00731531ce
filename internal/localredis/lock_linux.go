package localredis

// setLock is F_OFD_SETLK: a lock held by the open file, so that a second
// open refuses it in the same process too (a test's), not only in another.
const setLock = 37
