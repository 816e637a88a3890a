// Command devapp is a tiny program for the weft dev tests: "serve" answers
// HTTP on $WEFT_POD_IP:$WEFT_PORT, "call" sends GET requests to
// $WEFT_OUTBOUND_<SERVICE> and prints what happened.
package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: devapp serve | devapp call SERVICE COUNT")
		os.Exit(2)
	}
	switch os.Args[1] {
	case "serve":
		addr := os.Getenv("WEFT_POD_IP") + ":" + os.Getenv("WEFT_PORT")
		fmt.Println("serving on", addr)
		err := http.ListenAndServe(addr, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintf(w, "%s says hello", os.Getenv("WEFT_POD_NAME"))
		}))
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	case "call":
		target := os.Getenv("WEFT_OUTBOUND_" + os.Args[2])
		n, _ := strconv.Atoi(os.Args[3])
		client := &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
		for i := 0; i < n; i++ {
			resp, err := client.Get("http://" + target + "/")
			if err != nil {
				fmt.Println("call failed:", err)
			} else {
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				fmt.Printf("status %d: %s\n", resp.StatusCode, body)
			}
			time.Sleep(200 * time.Millisecond)
		}
		fmt.Println("done calling")
		// Stay up until stopped, as a long-running program would.
		select {}
	}
}
