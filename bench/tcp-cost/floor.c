#define _GNU_SOURCE
// The floor of a TCP DNS server that answers each query in its own wake:
// epoll (level-triggered, no timeout unless given), one read, the query
// sent back as its own answer (QR set, same ID), so no DNS work at all.
// THREADS loops (default 1), each with its own epoll set and its own
// SO_REUSEPORT listener, as a server's workers have: the kernel shares
// the accepts out, and each loop's wakes carry its share of the load.
// Build: gcc -O2 -pthread -o floor floor.c
// Run: floor PORT [EPOLL_TIMEOUT_MS [THREADS]] (bench/tcp-cost/wake.sh).
#include <sys/epoll.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <pthread.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
static int port, timeout = -1;
static int listener(void) {
  int l = socket(AF_INET, SOCK_STREAM, 0), one = 1;
  setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  setsockopt(l, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
  a.sin_addr.s_addr = htonl(0x7f000001);
  if (bind(l, (void*)&a, sizeof a) || listen(l, 1024)) exit(1);
  return l;
}
static void *loop(void *arg) {
  int l = (int)(long)arg, one = 1;
  int ep = epoll_create1(0);
  struct epoll_event ev = {.events = EPOLLIN, .data.fd = l}, evs[64];
  epoll_ctl(ep, EPOLL_CTL_ADD, l, &ev);
  char buf[8192];
  for (;;) {
    int n = epoll_wait(ep, evs, 64, timeout);
    for (int i = 0; i < n; i++) {
      int fd = evs[i].data.fd;
      if (fd == l) {
        int c = accept4(l, 0, 0, SOCK_NONBLOCK);
        if (c < 0) continue;
        setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        ev.events = EPOLLIN; ev.data.fd = c; epoll_ctl(ep, EPOLL_CTL_ADD, c, &ev);
        continue;
      }
      ssize_t r = recv(fd, buf, sizeof buf, 0);
      if (r <= 0) { close(fd); continue; }
      // Answer: the query with QR set (each message in the read).
      for (ssize_t at = 0; at + 4 < r;) { int len = (buf[at] & 255) << 8 | (buf[at+1] & 255); buf[at+4] |= 0x80; at += 2 + len; }
      send(fd, buf, r, 0);
    }
  }
  return 0;
}
int main(int argc, char **argv) {
  port = atoi(argv[1]);
  if (argc > 2) timeout = atoi(argv[2]);
  int threads = argc > 3 ? atoi(argv[3]) : 1;
  // Every listener is bound before any loop runs, so none misses a connection.
  int ls[64];
  if (threads < 1 || threads > 64) return 2;
  for (int t = 0; t < threads; t++) ls[t] = listener();
  pthread_t tid;
  for (int t = 1; t < threads; t++) pthread_create(&tid, 0, loop, (void *)(long)ls[t]);
  loop((void *)(long)ls[0]);
}
