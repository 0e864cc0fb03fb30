package ack

// RetryAfterOf is retryAfterOf, for tests that set the clock.
var RetryAfterOf = retryAfterOf
