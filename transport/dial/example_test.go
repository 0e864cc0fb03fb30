package dial_test

import (
	"context"
	"fmt"
	"os"

	"github.com/acemq/acemq/transport/dial"
)

func ExampleTransport() {
	url := os.Getenv("ORDERS_BROKER_URL") // amqp://... in production
	if url == "" {
		url = "memory://orders"
	}
	t, err := dial.Transport(context.Background(), url)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer t.Close()
	fmt.Printf("%T\n", t)
	// Output: *memory.Conn
}
