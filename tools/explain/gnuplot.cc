#include "tools/explain/gnuplot.h"

#include <cstdio>
#include <cstdlib>

#include "tensor/check.h"

namespace tessera {
namespace explain {

bool gnuplot_available() { return std::system("command -v gnuplot >/dev/null 2>&1") == 0; }

void check_plot_path(const std::string& path) {
  TS_CHECK(path.size() > 4 && path.compare(path.size() - 4, 4, ".svg") == 0, "--plot=", path,
           ": expected a file name ending in .svg");
  TS_CHECK(path.find_first_of("'\"\n") == std::string::npos, "--plot=", path,
           ": the file name may not contain quotes");
}

std::string gnuplot_preamble(const std::string& path, int width, int height, const std::string& title) {
  return "set terminal svg size " + std::to_string(width) + "," + std::to_string(height) +
         " dynamic font 'sans,11' background rgb 'white'\n" + "set termoption noenhanced\n" + "set output '" + path + "'\n" +
         "set title \"" + title + "\" noenhanced\n" + "set grid ytics\n";
}

void run_gnuplot(const std::string& script, const std::string& path) {
  TS_CHECK(gnuplot_available(), "--plot=", path,
           ": gnuplot is not installed (apt-get install gnuplot-nox; tools/setup.sh installs it)");
  FILE* pipe = popen("gnuplot", "w");
  TS_CHECK(pipe != nullptr, "--plot=", path, ": could not start gnuplot");
  std::fwrite(script.data(), 1, script.size(), pipe);
  const int status = pclose(pipe);
  TS_CHECK(status == 0, "--plot=", path, ": gnuplot failed (exit status ", status, ")");
  std::fprintf(stderr, "explain: wrote %s\n", path.c_str());
}

}  // namespace explain
}  // namespace tessera
