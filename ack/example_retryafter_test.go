package ack_test

import (
	"fmt"
	"net/http"

	"github.com/acemq/acemq/ack"
)

// A partner API that answers 429 or 503 says how long to wait in
// Retry-After; the handler passes its header on as it is. Without one the
// retry waits as the queue's ladder says.
func ExampleRetryAfterHeader() {
	answer := func(resp *http.Response) ack.Ack {
		switch resp.StatusCode {
		case http.StatusTooManyRequests, http.StatusServiceUnavailable:
			return ack.RetryAfterHeader(resp.Header, fmt.Errorf("partner API: %s", resp.Status))
		case http.StatusOK:
			return ack.Accept()
		}
		return ack.DeadLetter(fmt.Errorf("partner API: %s", resp.Status))
	}
	for _, resp := range []*http.Response{
		{StatusCode: 429, Status: "429 Too Many Requests", Header: http.Header{"Retry-After": {"120"}}},
		{StatusCode: 503, Status: "503 Service Unavailable", Header: http.Header{}},
		{StatusCode: 503, Status: "503 Service Unavailable", Header: http.Header{"Retry-After": {"a while"}}},
		{StatusCode: 200, Status: "200 OK"},
	} {
		fmt.Println(answer(resp))
	}
	// Output:
	// retry after 2m0s: partner API: 429 Too Many Requests
	// retry: partner API: 503 Service Unavailable
	// retry: partner API: 503 Service Unavailable
	// accept
}
