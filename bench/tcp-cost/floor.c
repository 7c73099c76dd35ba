#define _GNU_SOURCE
// The floor of a TCP DNS server that answers each query in its own wake:
// epoll (level-triggered, no timeout unless given), one read, the query
// sent back as its own answer (QR set, same ID), so no DNS work at all.
// Build: gcc -O2 -o floor floor.c; run: floor PORT [EPOLL_TIMEOUT_MS]
// (bench/tcp-cost/wake.sh floor ./floor ...).
#include <sys/epoll.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
int main(int argc, char **argv) {
  int port = atoi(argv[1]); int timeout = argc > 2 ? atoi(argv[2]) : -1;
  int l = socket(AF_INET, SOCK_STREAM, 0), one = 1;
  setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
  a.sin_addr.s_addr = htonl(0x7f000001);
  if (bind(l, (void*)&a, sizeof a) || listen(l, 1024)) return 1;
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
}
