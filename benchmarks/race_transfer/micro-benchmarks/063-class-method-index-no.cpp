/*
 * SPDX-License-Identifier: Apache-2.0
 *
 * A small grid class whose smoothing method writes a new field from the
 * current one and swaps the two buffers afterwards. The rows of the grid
 * are processed in a parallel loop inside the method.
 */
#include <cstdio>
#include <vector>
#include <utility>

class Field2D {
public:
  Field2D(int nx, int ny) : nx_(nx), ny_(ny), cur_(nx * ny, 0.0), next_(nx * ny, 0.0) {}

  double &at(int i, int j) { return cur_[i * ny_ + j]; }

  void smooth()
  {
#pragma omp parallel for
    for (int i = 1; i < nx_ - 1; i++)
      for (int j = 1; j < ny_ - 1; j++)
        next_[i * ny_ + j] = (cur_[(i - 1) * ny_ + j] + cur_[(i + 1) * ny_ + j] +
                              cur_[i * ny_ + j - 1] + cur_[i * ny_ + j + 1] +
                              4.0 * cur_[i * ny_ + j]) / 8.0;
    for (int i = 0; i < nx_; i++) {
      next_[i * ny_] = cur_[i * ny_];
      next_[i * ny_ + ny_ - 1] = cur_[i * ny_ + ny_ - 1];
    }
    for (int j = 0; j < ny_; j++) {
      next_[j] = cur_[j];
      next_[(nx_ - 1) * ny_ + j] = cur_[(nx_ - 1) * ny_ + j];
    }
    std::swap(cur_, next_);
  }

  double total() const
  {
    double s = 0.0;
    for (double v : cur_)
      s += v;
    return s;
  }

private:
  int nx_, ny_;
  std::vector<double> cur_, next_;
};

int main()
{
  Field2D f(200, 160);
  f.at(100, 80) = 1000.0;
  for (int it = 0; it < 50; it++)
    f.smooth();
  std::printf("total=%f centre=%f\n", f.total(), f.at(100, 80));
  return 0;
}
