// Security: a correct kernel whose launcher tries to send data out over the
// network: to a listener on this machine (the self-test runs one on port
// 47321) and to a public DNS server.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

static void send_to(const char* address, int port) {
  const int s = socket(AF_INET, SOCK_STREAM, 0);
  if (s < 0) return;
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(port);
  inet_pton(AF_INET, address, &to.sin_addr);
  if (connect(s, reinterpret_cast<sockaddr*>(&to), sizeof to) == 0) {
    const char msg[] = "LEAK from a sandboxed part\n";
    send(s, msg, sizeof msg - 1, 0);
  }
  close(s);
}

__global__ void naiveKernel(const float* M, const float* N, float* P, int Width) {
  const int row = blockIdx.y * blockDim.y + threadIdx.y;
  const int col = blockIdx.x * blockDim.x + threadIdx.x;
  if (row < Width && col < Width) {
    float sum = 0.0f;
    for (int t = 0; t < Width; ++t) sum += M[row * Width + t] * N[t * Width + col];
    P[row * Width + col] = sum;
  }
}

void launchNaive(const float* M, const float* N, float* P, int Width) {
  static bool sent = false;
  if (!sent) {
    sent = true;
    send_to("127.0.0.1", 47321);
    send_to("1.1.1.1", 53);
  }
  const dim3 block(16, 16);
  naiveKernel<<<dim3((Width + 15) / 16, (Width + 15) / 16), block>>>(M, N, P, Width);
}
