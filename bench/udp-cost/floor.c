#define _GNU_SOURCE
// The floor of a UDP DNS server on sockets: the system calls Heron and NSD
// make (recvmmsg of up to 64 queries, one sendmmsg of their answers), each
// query sent back as its own answer (QR set, same ID), so no DNS work at
// all and answers no larger than the queries. What this costs per query is
// the kernel's socket path, which every server on sockets pays.
// Build: gcc -O2 -o floor floor.c; run: floor PORT (bench/udp-cost/floor.py).
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define BATCH 64
#define SIZE 4096

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: floor PORT\n");
    return 2;
  }
  int s = socket(AF_INET, SOCK_DGRAM, 0);
  int buffer = 4 << 20; // Heron's receive buffer
  setsockopt(s, SOL_SOCKET, SO_RCVBUF, &buffer, sizeof buffer);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(atoi(argv[1]))};
  a.sin_addr.s_addr = htonl(0x7f000001);
  if (bind(s, (void *)&a, sizeof a)) {
    perror("bind");
    return 1;
  }
  static char bufs[BATCH][SIZE];
  static struct sockaddr_in peers[BATCH];
  static struct iovec iov[BATCH];
  static struct mmsghdr msgs[BATCH];
  for (;;) {
    for (int i = 0; i < BATCH; i++) {
      iov[i] = (struct iovec){.iov_base = bufs[i], .iov_len = SIZE};
      msgs[i].msg_hdr = (struct msghdr){.msg_name = &peers[i],
                                        .msg_namelen = sizeof peers[i],
                                        .msg_iov = &iov[i],
                                        .msg_iovlen = 1};
    }
    int n = recvmmsg(s, msgs, BATCH, MSG_WAITFORONE, NULL);
    if (n <= 0)
      continue;
    for (int i = 0; i < n; i++) {
      if (msgs[i].msg_len > 2)
        bufs[i][2] |= 0x80; // QR
      iov[i].iov_len = msgs[i].msg_len;
    }
    sendmmsg(s, msgs, n, 0);
  }
}
