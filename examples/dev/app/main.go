// Command app is the sample program of examples/dev. It reads the
// variables weft dev gives every program:
//
//	app serve          answer HTTP on $WEFT_POD_IP:$WEFT_PORT
//	app call SERVICE   call http://$WEFT_OUTBOUND_<SERVICE>/ once a second
package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: app serve | app call SERVICE")
		os.Exit(2)
	}
	switch os.Args[1] {
	case "serve":
		addr := os.Getenv("WEFT_POD_IP") + ":" + os.Getenv("WEFT_PORT")
		srv := &http.Server{Addr: addr, ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintf(w, "hello from %s (%s)\n", os.Getenv("WEFT_POD_NAME"), os.Getenv("WEFT_IDENTITY"))
		})}
		go func() { <-ctx.Done(); srv.Close() }()
		fmt.Println("serving on", addr)
		if err := srv.ListenAndServe(); err != http.ErrServerClosed {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	case "call":
		if len(os.Args) < 3 {
			fmt.Fprintln(os.Stderr, "usage: app call SERVICE")
			os.Exit(2)
		}
		target := os.Getenv("WEFT_OUTBOUND_" + strings.ToUpper(strings.ReplaceAll(os.Args[2], "-", "_")))
		if target == "" {
			fmt.Fprintf(os.Stderr, "no WEFT_OUTBOUND_ variable for %s: list it under calls in the mesh file\n", os.Args[2])
			os.Exit(2)
		}
		client := &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			resp, err := client.Get("http://" + target + "/")
			if err != nil {
				fmt.Println("call failed:", err)
			} else {
				body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
				resp.Body.Close()
				fmt.Printf("%d %s", resp.StatusCode, body)
				if !strings.HasSuffix(string(body), "\n") {
					fmt.Println()
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	default:
		fmt.Fprintf(os.Stderr, "unknown mode %q\n", os.Args[1])
		os.Exit(2)
	}
}
