#include "dist/device_groups.h"

#include <map>
#include <mutex>

namespace tessera {
namespace dist {

namespace {

struct Registry {
  std::mutex mutex;
  DeviceGroupFactory factories[kNumDeviceTypes];
  // Keyed by the bootstrap group's address and the device; the bootstrap is kept alive too.
  std::map<std::pair<const ProcessGroup*, std::pair<int, int>>,
           std::pair<std::shared_ptr<ProcessGroup>, std::shared_ptr<ProcessGroup>>>
      groups;
};

Registry& registry() {
  static Registry* r = new Registry();  // outlives static tensors freed at exit
  return *r;
}

}  // namespace

void register_device_group_factory(DeviceType type, DeviceGroupFactory factory) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.factories[static_cast<int>(type)] = std::move(factory);
}

bool has_device_group_factory(DeviceType type) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  return static_cast<bool>(r.factories[static_cast<int>(type)]);
}

std::shared_ptr<ProcessGroup> group_for_device(const std::shared_ptr<ProcessGroup>& group,
                                               Device device) {
  if (device.is_cpu() || group == nullptr) return group;
  Registry& r = registry();
  std::unique_lock<std::mutex> lock(r.mutex);
  const DeviceGroupFactory& factory = r.factories[static_cast<int>(device.type())];
  if (!factory) return group;
  const auto key = std::make_pair(group.get(), std::make_pair(static_cast<int>(device.type()),
                                                              device.index()));
  auto it = r.groups.find(key);
  if (it != r.groups.end()) return it->second.second;
  const DeviceGroupFactory make = factory;
  lock.unlock();  // creation is collective and may take a while
  std::shared_ptr<ProcessGroup> made = make(group, device);
  lock.lock();
  r.groups[key] = {group, made};
  return made;
}

}  // namespace dist
}  // namespace tessera
