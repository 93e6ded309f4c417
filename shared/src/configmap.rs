//! configmap
